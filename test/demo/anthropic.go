package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// The Anthropic account's real limits, below the sample quota's 50 requests, 30,000 input and
// 8,000 output tokens a minute, and the calls that learn and then fill them.
const (
	claudeQuota          = "anthropic"
	claudeModel          = "claude-sonnet-4-5"
	claudeRealRPM        = 40
	claudeRealInputTPM   = 20000
	claudeRealOutputTPM  = 4000
	claudeCallTokens     = 500 // each call's max_tokens, which its answer fills
	claudeLearnCalls     = 2   // through each gateway
	claudeBurstCalls     = 6   // at once, past the output minute the learned limit leaves
	claudeUpstreamKey    = "sk-ant-provider-example"
	claudeSampleKey      = "sk-umbrella-erin-0123456789abcdef0123456789"
	claudeAnswerDeadline = 3 * time.Minute
)

// learnAnthropicLimits puts a `lab provider -api anthropic` whose account allows less than the
// quota anthropic says at the quota's address, calls it through the gateways with Anthropic's Go
// SDK, shows the three limits they learned from its anthropic-ratelimit-* headers in kubectl
// describe, and then sends more than the learned output minute holds at once: the gateways keep
// the excess in their queue, and the account refuses nothing.
func (st *story) learnAnthropicLimits() {
	st.section("An Anthropic account whose real limits are below its quota: learned, and kept")
	fmt.Printf("The quota %s says 50 requests, 30,000 input and 8,000 output tokens a minute. The account behind it\n"+
		"now allows %d, %d and %d, and says so in the anthropic-ratelimit-* headers of every answer, as Anthropic does.\n"+
		"The tenant umbrella calls it with Anthropic's Go SDK, unmodified but for its base URL.\n\n",
		claudeQuota, claudeRealRPM, claudeRealInputTPM, claudeRealOutputTPM)
	st.startProcess("anthropic", "lab", "provider", "-listen", st.claudeAddr, "-api", "anthropic", "-api-key", claudeUpstreamKey,
		"-models", claudeModel, "-latency", "100ms", "-latency-stddev", "0", "-answer-tokens", "0",
		"-requests-per-minute", strconv.Itoa(claudeRealRPM), "-tokens-per-minute", "1000000000",
		"-input-tokens-per-minute", strconv.Itoa(claudeRealInputTPM), "-output-tokens-per-minute", strconv.Itoa(claudeRealOutputTPM))
	st.waitReady("http://" + st.claudeAddr + "/stats")
	for _, g := range st.gateways {
		for range claudeLearnCalls {
			st.claudeCall(claudeClient(g.url))
		}
	}
	st.waitClaudeLearned()
	st.kubectl("describe", "pq", claudeQuota, "-n", namespace)
	fmt.Printf("demo: the gateways learned %s's limits from its answers: %d requests, %d input and %d output tokens a minute, below the quota's; they pace to them now\n",
		claudeQuota, claudeRealRPM, claudeRealInputTPM, claudeRealOutputTPM)
	st.claudeBurst()
}

// claudeClient is Anthropic's Go SDK calling the gateway at url as the sample tenant umbrella.
func claudeClient(url string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(url), option.WithAPIKey(claudeSampleKey)}, opts...)...)
}

// claudeCall sends one call of claudeCallTokens through c, which must be answered whole.
func (st *story) claudeCall(c anthropic.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), claudeAnswerDeadline)
	defer cancel()
	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: claudeModel, MaxTokens: claudeCallTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}})
	if err != nil {
		st.r.Fatalf("a call for %s: %v", claudeQuota, err)
	}
	if msg.Usage.OutputTokens != claudeCallTokens {
		st.r.Fatalf("a call for %s was answered %d output tokens; want %d", claudeQuota, msg.Usage.OutputTokens, claudeCallTokens)
	}
}

// claudeBurst sends claudeBurstCalls at once, half through each gateway: with the learn calls,
// more output than the account's minute holds, so some wait in the gateways' queue for the
// minute to roll on. It shows that the account refused none of them.
func (st *story) claudeBurst() {
	fmt.Printf("\nNow %d calls of %d output tokens at once, through both gateways: with the %d before them, %d output tokens,\n"+
		"more than the %d a minute the account allows. The gateways hold the excess until its minute has room.\n",
		claudeBurstCalls, claudeCallTokens, claudeLearnCalls*len(st.gateways), (claudeBurstCalls+claudeLearnCalls*len(st.gateways))*claudeCallTokens, claudeRealOutputTPM)
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range claudeBurstCalls {
		// The door may turn a call away with the time to come back, which the SDK follows.
		c := claudeClient(st.gateways[i%len(st.gateways)].url, option.WithMaxRetries(5))
		wg.Go(func() { st.claudeCall(c) })
	}
	wg.Wait()
	var stats struct {
		Accepted                int64 `json:"accepted"`
		Rejected429Requests     int64 `json:"rejected429Requests"`
		Rejected429InputTokens  int64 `json:"rejected429InputTokens"`
		Rejected429OutputTokens int64 `json:"rejected429OutputTokens"`
		Rejected529             int64 `json:"rejected503"`
	}
	if err := getJSON("http://"+st.claudeAddr+"/stats", &stats); err != nil {
		st.r.Fatal(err)
	}
	refused := stats.Rejected429Requests + stats.Rejected429InputTokens + stats.Rejected429OutputTokens + stats.Rejected529
	fmt.Printf("demo: %s served %d calls through the gateways and refused %d; the burst of %d took %.0fs, held for the account's minute\n",
		claudeQuota, stats.Accepted, refused, claudeBurstCalls, time.Since(begin).Seconds())
	if refused != 0 {
		st.r.Errorf("the Anthropic account refused %d calls; want none", refused)
	}
}

// waitClaudeLearned waits until the manager has written the three learned limits into the
// Anthropic quota's status.
func (st *story) waitClaudeLearned() {
	deadline := time.Now().Add(readyTimeout)
	want := fmt.Sprintf("%d %d %d", claudeRealRPM, claudeRealInputTPM, claudeRealOutputTPM)
	for {
		got := st.c.Kubectl(st.r, "get", "pq", claudeQuota, "-n", namespace, "-o",
			"jsonpath={.status.learnedLimits.requestsPerMinute} {.status.learnedLimits.inputTokensPerMinute} {.status.learnedLimits.outputTokensPerMinute}")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			st.r.Fatalf("the quota %s shows learned limits %q after %s; want %q", claudeQuota, got, readyTimeout, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
