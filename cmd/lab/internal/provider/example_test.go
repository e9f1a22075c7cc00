package provider_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

func Example() {
	opts := provider.DefaultOptions() // the reference account
	opts.APIKey = "sk-lab"
	opts.Latency, opts.LatencyStdDev = 0, 0 // answer at once
	p, err := provider.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p) // or http.ListenAndServe("127.0.0.1:8081", p)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":3,"messages":[{"role":"user","content":"Summarise this page."}]}`))
	req.Header.Set("Authorization", "Bearer sk-lab")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var answer struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, string(answer.Usage))
	fmt.Println("requests left:", resp.Header.Get("x-ratelimit-remaining-requests"), "tokens left:", resp.Header.Get("x-ratelimit-remaining-tokens"))
	st := p.Stats()
	fmt.Println("served:", st.Accepted, "spent (micro-dollars):", st.MicroDollars)
	// Output:
	// 200 OK {"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}
	// requests left: 1499 tokens left: 299992
	// served: 1 spent (micro-dollars): 24
}
