package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// rampReport is what the demo reads of the ramp's report.json.
type rampReport struct {
	Cases []struct {
		Case            string `json:"case"`
		Books           int    `json:"books"`
		CleanBooks      int    `json:"cleanBooks"`
		UnfinishedBooks int    `json:"unfinishedBooks"`
		Pages           int    `json:"pages"`
		DiedAtProvider  int    `json:"diedAtProvider"`
		Refused         int    `json:"refused"`
		BusyAnswers     int    `json:"busyAnswers"`
		Billed          string `json:"billed"`
		Provider        struct {
			Accepted            int64 `json:"accepted"`
			Rejected429Requests int64 `json:"rejected429Requests"`
			Rejected429Tokens   int64 `json:"rejected429Tokens"`
			Rejected503         int64 `json:"rejected503"`
		} `json:"provider"`
	} `json:"cases"`
}

// rampThroughGateways runs the lab's queue case with its pages sent through the two gateways,
// as the tenant the plans were compiled for, and prints the ramp's table and a summary.
func (st *story) rampThroughGateways() {
	st.section("The lab's queue case (case 4), through the two gateways")
	fmt.Printf("Users join every %s (%s), each uploading a book of %d pages, one call a page, spread over\n"+
		"both gateways; the simulated provider allows 1,500 requests and 300,000 tokens a minute and\n"+
		"200 calls in flight, and the gateways keep to 95%% of that.\n\n", st.s.step, st.s.users, st.s.pages)
	args := []string{"ramp", "-cases", "queue", "-provider-addr", st.providerAddr,
		"-users", st.s.users, "-step", st.s.step.String(), "-pages", strconv.Itoa(st.s.pages),
		"-queue-cap", st.s.duration.String(), "-out", st.out}
	for _, g := range st.gateways {
		args = append(args, "-gateway-url", g.url)
	}
	cmd := exec.Command(filepath.Join(st.bin, "lab"), args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		st.r.Fatalf("lab ramp: %v", err)
	}
	var rep rampReport
	if err := readJSON(filepath.Join(st.out, "report.json"), &rep); err != nil || len(rep.Cases) != 1 {
		st.r.Fatalf("read the ramp's report: %v", err)
	}
	c := rep.Cases[0]
	p := c.Provider
	fmt.Printf("\ndemo: case 4 (queue) through 2 gateways: %d provider errors (429 on requests %d, on tokens %d, 503 %d), "+
		"%d pages died at the provider, %d refused; %d of %d books clean, %d unfinished; billed $%s\n",
		p.Rejected429Requests+p.Rejected429Tokens+p.Rejected503, p.Rejected429Requests, p.Rejected429Tokens, p.Rejected503,
		c.DiedAtProvider, c.Refused, c.CleanBooks, c.Books, c.UnfinishedBooks, c.Billed)
	fmt.Printf("demo: the ramp's report and chart are in %s\n", st.out)
}
