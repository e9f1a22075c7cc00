package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// demoTimeout bounds the short demo, the control plane's start included.
const demoTimeout = 9 * time.Minute

// TestDemo runs `make demo` in its short mode, as a new user would run it, and checks the lines
// that tell the story: the self-hosted quota Ready once configured, its Pods or not, the queue
// case through the gateways with whole books, no provider error and a fair share, the hosted
// account's lower limits learned and shown by kubectl describe, an Anthropic account's three
// limits learned and kept with no refusal, the HPA scaling the self-hosted
// model up on the gateways' queue while its Pods queue nothing, and the quotas' live usage.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("demo: needs the control plane and Redis; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", "../..", "demo")
	cmd.Env = append(os.Environ(), "DEMO_SHORT=1", "DEMO_OUT="+t.TempDir())
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^NAME +RPM +RPM-USED +TPM +TPM-USED +IN-FLIGHT +QUEUED +ENGINE +PODS +GPUS +READY +AGE$`),
		// The self-hosted quota is Ready once configured, whether its first Pod is (Active) or not.
		regexp.MustCompile(`(?m)^providerquota.sluice.dev/llama +(\d+ +)*vllm +(\d+ +)*True +\S+$`),
		regexp.MustCompile(`(?m)^llama +.*\sTrue +Compiled +(True|False) +\S+$`),
		// The queue case through the gateways: whole books, nothing lost at the provider, fair.
		regexp.MustCompile(`(?m)^demo: over the whole books: Jain's index over users (0\.9\d\d|1\.000), `),
		regexp.MustCompile(`(?m)^demo: the gateways learned openai's limits from its answers: 600 requests and 100000 tokens a minute`),
		regexp.MustCompile(`(?m)^demo: the gateways learned anthropic's limits from its answers: 40 requests, 20000 input and 4000 output tokens a minute`),
		regexp.MustCompile(`(?m)^demo: anthropic served 10 calls through the gateways and refused 0;`),
		regexp.MustCompile(`(?m)^demo: the HPA scaled llama from 1 to [2-4] replicas on the gateways' queue`),
		regexp.MustCompile(`(?m)^demo: the gateways queued up to [1-9]\d* calls for llama while its Pods reported at most 0 waiting; [1-9]\d* calls answered, 0 failed`),
		regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  llama +Deployment/llama +\d+/8 \(avg\)`),
	} {
		if !want.MatchString(text) {
			t.Errorf("the demo's output has no line matching %s", want)
		}
	}
	books := regexp.MustCompile(`(?m)^demo: case 4 \(queue\) through 2 gateways: 0 provider errors \(.*\), 0 pages died at the provider, 0 refused; (\d+) of (\d+) books clean, 0 unfinished`).FindStringSubmatch(text)
	if books == nil || books[1] != books[2] {
		t.Errorf("the queue case's summary is not of whole books, no provider error and none refused: %q", books)
	}
	_, learned, _ := strings.Cut(text, "A hosted account whose real limits are below its quota")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Reason:\s+ProviderReportsLower\s+Status:\s+True\s+Type:\s+LimitsBelowSpec`),
		regexp.MustCompile(`Learned Limits:\s+Requests Per Minute:\s+600\s+Tokens Per Minute:\s+100000`),
	} {
		if !want.MatchString(learned) {
			t.Errorf("kubectl describe pq openai after the account's answers shows no line matching %s", want)
		}
	}
	_, claude, _ := strings.Cut(text, "An Anthropic account whose real limits are below its quota")
	if want := regexp.MustCompile(`Learned Limits:\s+Input Tokens Per Minute:\s+20000\s+Output Tokens Per Minute:\s+4000\s+Requests Per Minute:\s+40`); !want.MatchString(claude) {
		t.Errorf("kubectl describe pq anthropic after the account's answers shows no line matching %s", want)
	}
	_, final, ok := strings.Cut(text, "The quotas again, with live usage")
	if !ok {
		t.Fatalf("the demo did not reach its last section:\n%s", out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Requests Last Minute: +[1-9]\d*`),
		regexp.MustCompile(`Spend This Month: +0\.\d*[1-9]`),
		regexp.MustCompile(`Ready Pods: +[2-4]`),
	} {
		if !want.MatchString(final) {
			t.Errorf("the last describe shows no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Logf("the demo's output:\n%s", out)
	}
}
