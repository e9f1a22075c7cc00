package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The hosted account's real limits, below the sample quota's 1,500 requests and 300,000 tokens a
// minute.
const (
	realRPM = 600
	realTPM = 100000
	// learnCalls are sent through each gateway to learn them.
	learnCalls = 3
)

// learnHostedLimits puts a `lab provider` whose account allows less than the quota openai says
// at the quota's address, sends a few calls through the gateways, and shows the limits they
// learned from its x-ratelimit-* headers in kubectl describe.
func (st *story) learnHostedLimits() {
	st.section("A hosted account whose real limits are below its quota: learned from its answers")
	fmt.Printf("The quota %s says 1,500 requests and 300,000 tokens a minute. The account behind it now allows\n"+
		"%d and %d, and says so in the x-ratelimit-limit-* headers of every answer, as OpenAI does.\n\n", hostedQuota, realRPM, realTPM)
	st.startProcess("provider", "lab", "provider", "-listen", st.providerAddr,
		"-requests-per-minute", strconv.Itoa(realRPM), "-tokens-per-minute", strconv.Itoa(realTPM), "-latency", "100ms")
	st.waitReady("http://" + st.providerAddr + "/stats")
	for _, g := range st.gateways {
		for range learnCalls {
			st.hostedCall(g.url)
		}
	}
	st.waitLearned()
	st.kubectl("describe", "pq", hostedQuota, "-n", namespace)
	fmt.Printf("demo: the gateways learned %s's limits from its answers: %d requests and %d tokens a minute, below the quota's; they pace to them now\n",
		hostedQuota, realRPM, realTPM)
}

// hostedCall sends one call for the hosted model through a gateway, as the sample tenant.
func (st *story) hostedCall(gatewayURL string) {
	body := `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, gatewayURL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+sampleKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		st.r.Fatalf("a call for %s: %v", hostedQuota, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		st.r.Fatalf("a call for %s: %s %s", hostedQuota, resp.Status, b.String())
	}
}

// waitLearned waits until the manager has written the learned limits into the quota's status.
func (st *story) waitLearned() {
	deadline := time.Now().Add(readyTimeout)
	want := fmt.Sprintf("%d %d", realRPM, realTPM)
	for {
		got := st.c.Kubectl(st.r, "get", "pq", hostedQuota, "-n", namespace,
			"-o", "jsonpath={.status.learnedLimits.requestsPerMinute} {.status.learnedLimits.tokensPerMinute}")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			st.r.Fatalf("the quota %s shows learned limits %q after %s; want %q", hostedQuota, got, readyTimeout, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// getJSON decodes what url serves into v.
func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
