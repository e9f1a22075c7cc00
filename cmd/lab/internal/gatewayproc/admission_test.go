package gatewayproc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/labtest"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// gatewayBin is the gateway built once for the package's tests; empty with -short.
var gatewayBin string

func TestMain(m *testing.M) { os.Exit(labtest.Main(m, &gatewayBin)) }

// The admission test: a lab provider that counts characters / 4 when it admits a call, and
// prompts of long words, which o200k_base packs three times as densely: 2,400 bytes, 600
// tokens by characters and about 200 by the encoding.
const (
	admissionTPM   = 6000
	admissionCalls = 20
	admissionKey   = "sk-words"
)

var longWords = strings.Repeat(" information", 200)

// admissionConfig is a gateway in front of the lab at url that paces the lab's tokens per
// minute, counting prompts as count says the lab does.
func admissionConfig(url string, count gatewayv1.AdmissionCount) gatewayv1.Config {
	return gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "lab", BaseURL: url + "/v1", TokensPerMinute: admissionTPM, AdmissionCount: count,
			Models: []gatewayv1.Model{{Name: "gpt-4o-mini", Encoding: "o200k_base", DefaultMaxTokens: 10}},
			Retry:  gatewayv1.Retry{MaxAttempts: 1},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name: "words", Providers: []string{"lab"},
			Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey(admissionKey), User: "u"}},
			// Calls past what the first seconds allow are refused at the door, not kept.
			MaxWait: metav1.Duration{Duration: time.Second},
		}},
	}
}

// TestACharacterCountingProviderGetsNo429s sends a burst of calls whose prompts count three
// times more by characters than by the encoding through the gateway to a lab provider that
// counts characters at admission. Paced by the encoding's count, the gateway lets through more
// than the lab's minute holds and the lab answers 429; paced by the larger count, none.
func TestACharacterCountingProviderGetsNo429s(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary")
	}
	tests := []struct {
		count    gatewayv1.AdmissionCount
		want429s bool
	}{
		{gatewayv1.AdmissionCountTokenizer, true},
		{gatewayv1.AdmissionCountCharacters, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.count), func(t *testing.T) {
			opts := provider.DefaultOptions()
			opts.TokensPerMinute, opts.Latency, opts.LatencyStdDev = admissionTPM, 0, 0
			lab, err := provider.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(lab)
			defer srv.Close()
			g, err := Start(t.Context(), gatewayBin, "admission", admissionConfig(srv.URL, tc.count), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Stop()
			served := sendWords(t.Context(), g.URL, admissionCalls)
			st := lab.Stats()
			t.Logf("%s: %d of %d calls served, the lab answered %d with 429", tc.count, served, admissionCalls, st.Rejected429Tokens)
			if got := st.Rejected429Tokens > 0; got != tc.want429s {
				t.Errorf("the lab answered %d calls 429 for its tokens; want 429s: %t", st.Rejected429Tokens, tc.want429s)
			}
			if served == 0 {
				t.Error("no call was served")
			}
		})
	}
}

// sendWords sends n calls of long words at once to the gateway at url and returns how many were
// answered 200.
func sendWords(ctx context.Context, url string, n int) int {
	return sendAtOnce(ctx, url, admissionKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+longWords+`"}]}`, n)
}

// sendAtOnce sends n chat calls of body at once with key to the API at url and returns how many
// were answered 200.
func sendAtOnce(ctx context.Context, url, key, body string, n int) int {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		served int
	)
	for range n {
		wg.Go(func() {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				return
			}
			r.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				mu.Lock()
				served++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return served
}
