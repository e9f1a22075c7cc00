package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "usage: lab <command>"},
		{name: "unknown command", args: []string{"rampage"}, wantCode: 2, wantStderr: "usage: lab <command>"},
		{name: "help", args: []string{"-h"}, wantCode: 0, wantStderr: "usage: lab <command>"},
		{name: "provider's flags", args: []string{"provider", "-h"}, wantCode: 0, wantStderr: "-tokens-per-minute"},
		{name: "a bad flag", args: []string{"provider", "-requests-per-minute", "many"}, wantCode: 2, wantStderr: "invalid value"},
		{name: "a price that is not a decimal", args: []string{"provider", "-input-price", "1e3"}, wantCode: 2, wantStderr: "provider: price"},
		{name: "an unknown engine", args: []string{"inference", "-engine", "triton"}, wantCode: 2, wantStderr: "must be one of llamacpp, sglang, tgi, vllm"},
		{name: "options New refuses", args: []string{"inference", "-gpus", "0"}, wantCode: 1, wantStderr: "GPUs and MaxNumSeqs must be positive"},
		{name: "ramp's flags", args: []string{"ramp", "-h"}, wantCode: 0, wantStderr: "-pages"},
		{name: "ramp refuses an unknown case", args: []string{"ramp", "-cases", "retry"}, wantCode: 1, wantStderr: `unknown case \"retry\"`},
		{name: "overhead's flags", args: []string{"overhead", "-h"}, wantCode: 0, wantStderr: "-rates"},
		{name: "overhead refuses rates that do not increase", args: []string{"overhead", "-rates", "2000,500"}, wantCode: 1, wantStderr: "Rates must be positive and increasing"},
		{name: "the bare proxy needs its upstream", args: []string{"overhead-proxy"}, wantCode: 1, wantStderr: "overhead-proxy UPSTREAM"},
		{name: "a stray argument", args: []string{"inference", "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
		{name: "the provider serves and shuts down", args: []string{"provider", "-listen", "127.0.0.1:0"}, wantCode: 0, wantStderr: "shutting down"},
		{name: "the inference server serves and shuts down", args: []string{"inference", "-listen", "127.0.0.1:0", "-engine", "tgi"}, wantCode: 0, wantStderr: "shutting down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // a signal has come: serve, then shut down at once
			var stderr bytes.Buffer
			got := run(ctx, tc.args, &stderr)
			if got != tc.wantCode || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("run(%q) = %d, stderr:\n%s\nwant %d and %q in stderr", tc.args, got, &stderr, tc.wantCode, tc.wantStderr)
			}
		})
	}
}
