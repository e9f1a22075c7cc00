package estimate

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// counter is shared by the tests so that each encoding loads once.
var counter = NewCounter()

// TestCountPublished checks counts that OpenAI published in its cookbook
// ("How to count tokens with tiktoken"), not counts taken from the encoder.
func TestCountPublished(t *testing.T) {
	tests := []struct {
		encoding string
		text     string
		want     int64
	}{
		{"cl100k_base", "hello world", 2},
		{"o200k_base", "hello world", 2},
		{"cl100k_base", "tiktoken is great!", 6},
		{"o200k_base", "tiktoken is great!", 6},
		{"cl100k_base", "antidisestablishmentarianism", 6},
		{"o200k_base", "antidisestablishmentarianism", 6},
		{"p50k_base", "antidisestablishmentarianism", 5},
		{"r50k_base", "antidisestablishmentarianism", 5},
		{"cl100k_base", "2 + 2 = 4", 7},
		{"o200k_base", "2 + 2 = 4", 7},
		{"p50k_base", "2 + 2 = 4", 5},
		{"r50k_base", "2 + 2 = 4", 5},
		{"cl100k_base", "お誕生日おめでとう", 9},
		{"o200k_base", "お誕生日おめでとう", 8},
		{"p50k_base", "お誕生日おめでとう", 14},
		{"r50k_base", "お誕生日おめでとう", 14},
	}
	for _, tc := range tests {
		t.Run(tc.encoding+"/"+tc.text, func(t *testing.T) {
			if got := counter.Count(tc.encoding, tc.text); got != tc.want {
				t.Errorf("Count(%q, %q) = %d, want %d", tc.encoding, tc.text, got, tc.want)
			}
		})
	}
}

func TestCountProxy(t *testing.T) {
	tests := []struct {
		name     string
		counter  *Counter
		encoding string
		text     string
		want     int64
	}{
		{"empty encoding", counter, "", "hello world", 3}, // 11 bytes
		{"unknown encoding", counter, "gpt2", "hello world", 3},
		{"multiple of four", counter, "", "abcdefgh", 2},
		{"multibyte runes count bytes", counter, "", "お誕生日", 3}, // 12 bytes
		{"empty text", counter, "", "", 0},
		{"empty text, real encoding", counter, "cl100k_base", "", 0},
		{"zero Counter", &Counter{}, "cl100k_base", "hello world", 3},
		{"nil Counter", nil, "o200k_base", "hello", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.counter.Count(tc.encoding, tc.text); got != tc.want {
				t.Errorf("Count(%q, %q) = %d, want %d", tc.encoding, tc.text, got, tc.want)
			}
		})
	}
}

// TestCountSegments checks that cutting long text before counting changes
// nothing where the text has spaces, and little where it has none.
func TestCountSegments(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		slack int64 // tokens the cuts may add
	}{
		{"prose", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200), 0},
		{"double spaces and newlines", strings.Repeat("Dear  Sir,\n\n  thank   you!\r\n\tYours ", 200), 0},
		{"code", strings.Repeat("func f(x int) int { return x*2 } // ok\n", 200), 0},
		{"mixed scripts", strings.Repeat("Grüße, мир и お誕生日 ", 300), 0},
		{"no spaces", strings.Repeat("お誕生日おめでとう", 200), 6},
	}
	for _, enc := range []string{"cl100k_base", "o200k_base"} {
		for _, tc := range tests {
			t.Run(enc+"/"+tc.name, func(t *testing.T) {
				whole := int64(len(referenceEncoding(t, enc).EncodeOrdinary(tc.text)))
				got := counter.Count(enc, tc.text)
				if got < whole || got > whole+tc.slack {
					t.Errorf("Count = %d, want %d (+%d)", got, whole, tc.slack)
				}
			})
		}
	}
}

// TestCountCutPieces checks texts whose segments are cut inside a piece
// against tiktoken-go's count of the whole text: each cut may count one
// token fewer, or up to five more. A lead shifts the cuts along the text.
func TestCountCutPieces(t *testing.T) {
	for _, enc := range []string{"cl100k_base", "o200k_base", "r50k_base"} {
		for _, tc := range sizedTexts(3000) {
			for _, lead := range []string{"", "x", "xyz!", "seventeen bytes, "} {
				text := lead + tc.text
				t.Run(enc+"/"+tc.name+"/"+lead, func(t *testing.T) {
					whole := int64(len(referenceEncoding(t, enc).EncodeOrdinary(text)))
					cuts := cutCount(text)
					if got := counter.Count(enc, text); got < whole-cuts || got > whole+5*cuts {
						t.Errorf("Count = %d, want %d (-%d, +%d) for %d cuts", got, whole, cuts, 5*cuts, cuts)
					}
				})
			}
		}
	}
}

// cutCount returns the number of cuts Count makes in text.
func cutCount(text string) int64 {
	var n int64
	for cut := cutPoint(text); cut < len(text); cut = cutPoint(text) {
		text = text[cut:]
		n++
	}
	return n
}

// TestCountLongRun checks that a long run without spaces, which segments cut
// inside its one piece, counts between a token for 16 bytes and one a byte.
func TestCountLongRun(t *testing.T) {
	text := strings.Repeat("a", 256<<10)
	got := counter.Count("cl100k_base", text)
	if got < int64(len(text))/16 || got > int64(len(text)) {
		t.Errorf("Count of %d bytes = %d, want between %d and %d", len(text), got, len(text)/16, len(text))
	}
}

func TestCountInvalidUTF8(t *testing.T) {
	got := counter.Count("cl100k_base", "ab\xffcd\xc3")
	if got <= 0 {
		t.Errorf("Count = %d, want more than 0", got)
	}
}

func TestCountConcurrent(t *testing.T) {
	c := NewCounter()
	const goroutines = 8
	got := make([]int64, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		enc := []string{"cl100k_base", "o200k_base"}[i%2]
		wg.Go(func() { got[i] = c.Count(enc, "tiktoken is great!") })
	}
	wg.Wait()
	for i, n := range got {
		if n != 6 {
			t.Errorf("goroutine %d: Count = %d, want 6", i, n)
		}
	}
}

// offlineChild marks the process that TestEncodingsLoadOffline starts.
const offlineChild = "ESTIMATE_TEST_OFFLINE_CHILD"

// TestEncodingsLoadOffline loads every encoding in a fresh process whose
// proxies point at a closed port, whose HTTP transport refuses every request
// and whose tiktoken cache is an empty directory, and checks that the cache
// stays empty: the encodings come from the binary.
func TestEncodingsLoadOffline(t *testing.T) {
	if os.Getenv(offlineChild) != "" {
		loadOffline(t)
		return
	}
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEncodingsLoadOffline$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		offlineChild+"=1",
		"TIKTOKEN_CACHE_DIR="+cache, "DATA_GYM_CACHE_DIR="+cache,
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "no_proxy=",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestEncodingsLoadOffline") {
		t.Fatalf("child process did not run the test:\n%s", out)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("tiktoken cache has %d entries, want none", len(entries))
	}
}

// loadOffline is the child's half of TestEncodingsLoadOffline.
func loadOffline(t *testing.T) {
	transport := &refusingTransport{}
	saved := http.DefaultTransport
	http.DefaultTransport = transport
	t.Cleanup(func() { http.DefaultTransport = saved })

	c := NewCounter()
	for enc := range c.encoders {
		if c.encoder(enc) == nil {
			t.Errorf("encoding %s did not load", enc)
		}
	}
	if got := c.Count("o200k_base", "hello world"); got != 2 {
		t.Errorf("Count = %d, want 2", got)
	}
	if n := transport.calls.Load(); n != 0 {
		t.Errorf("%d HTTP requests, want none", n)
	}
}

// refusingTransport fails every request and counts them.
type refusingTransport struct {
	calls atomic.Int64
}

func (rt *refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	rt.calls.Add(1)
	return nil, errors.New("estimate test: network is off limits")
}
