package inference_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/inference"
)

func Example() {
	opts := inference.DefaultOptions() // one GPU of vLLM
	opts.TokenLatency = time.Millisecond
	s, err := inference.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	srv := httptest.NewServer(s) // or http.ListenAndServe("127.0.0.5:8000", s)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"meta-llama/Llama-3.1-8B-Instruct","max_tokens":3,"messages":[{"role":"user","content":"Hello!"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var answer struct {
		Usage json.RawMessage `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, string(answer.Usage))

	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	for lines := bufio.NewScanner(resp.Body); lines.Scan(); {
		if !strings.HasPrefix(lines.Text(), "#") {
			fmt.Println(lines.Text())
		}
	}
	// Output:
	// 200 OK {"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}
	// vllm:kv_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
	// vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
	// vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0
}
