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
		// The door's figures, measured over whole books: absent when the ramp stopped at its
		// cap with books unfinished.
		JainOverUsers      float64 `json:"jainOverUsers"`
		RefusalsPerPage    float64 `json:"refusalsPerPage"`
		BacklogTokensShare float64 `json:"backlogTokensShare"`
		EstimateErrorP90   float64 `json:"estimateErrorP90"`
		// EstimateErrorP90AfterArrivals is over the pages that queued once the last users arrived.
		EstimateErrorP90AfterArrivals float64 `json:"estimateErrorP90AfterArrivals"`
		Provider                      struct {
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
	fmt.Printf("Users join every %s (%s), each uploading a book of %d pages, one call a page, on one of\n"+
		"the two gateways; the simulated provider allows 1,500 requests and 300,000 tokens a minute and\n"+
		"200 calls in flight, and the gateways keep to 95%% of that. A page turned away comes back when\n"+
		"told, at most 3 times. The ramp runs until its books are done.\n\n", st.s.step, st.s.users, st.s.pages)
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
	if c.UnfinishedBooks > 0 {
		fmt.Printf("demo: the ramp stopped at its cap with books unfinished: its fairness and estimates are not measured\n")
	} else {
		fmt.Printf("demo: over the whole books: Jain's index over users %.3f, %.2f busy answers a page, the provider at %.0f%% of its tokens a minute while pages queued, "+
			"the door's estimate within %.0f%% at p90 (%.0f%% for pages that queued after the last users arrived)\n",
			c.JainOverUsers, c.RefusalsPerPage, 100*c.BacklogTokensShare, 100*c.EstimateErrorP90, 100*c.EstimateErrorP90AfterArrivals)
	}
	fmt.Printf("demo: the ramp's report and chart are in %s\n", st.out)
}
