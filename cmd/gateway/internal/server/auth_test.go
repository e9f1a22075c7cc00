package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFoldScanFindsAFoldedAuthorization feeds a connection's bytes to foldScan, whole and a few
// bytes at a time, as reads may cut them anywhere.
func TestFoldScanFindsAFoldedAuthorization(t *testing.T) {
	const body = "{\r\n  \"model\": \"m\",\r\n  \"messages\": []\r\n}"
	request := func(headers string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + headers + "Content-Length: 41\r\n\r\n" + body
	}
	tests := []struct {
		name string
		sent string
		want bool
	}{
		{"one line, and a body's indented lines", request("Authorization: Bearer sk-acme-alice\r\n"), false},
		{"folded", request("Authorization: Bearer\r\n sk-acme-alice\r\n"), true},
		{"folded with a tab, lower case", request("authorization: Bearer\r\n\tsk-acme-alice\r\n"), true},
		{"folded, bare line feeds", "GET /v1/models HTTP/1.1\nAuthorization: Bearer\n sk-acme-alice\n\n", true},
		{"another header folded", request("User-Agent: a\r\n b\r\nAuthorization: Bearer sk-acme-alice\r\n"), false},
		{"the second request folded", request("Authorization: Bearer sk-acme-alice\r\n") + request("Authorization: Bearer\r\n sk-acme-alice\r\n"), true},
		{"an Authorization in a body", request("Authorization: Bearer sk-acme-alice\r\n") + "\r\nAuthorization: Bearer\r\n x\r\n", false},
		{"x-api-key on one line", request("X-Api-Key: sk-acme-alice\r\n"), false},
		{"x-api-key folded", request("x-api-key:\r\n sk-acme-alice\r\n"), true},
	}
	for _, tc := range tests {
		for _, size := range []int{len(tc.sent), 1, 3, 7} {
			var s foldScan
			for sent := tc.sent; sent != ""; {
				n := min(size, len(sent))
				s.scan([]byte(sent[:n]))
				sent = sent[n:]
			}
			if got := s.folded.Load(); got != tc.want {
				t.Errorf("%s, read %d bytes at a time: folded = %t; want %t", tc.name, size, got, tc.want)
			}
		}
	}
}

// TestAnAmbiguousAuthorizationIsRefused checks that two Authorization headers, or one folded over
// lines on the request's connection, are refused 401, even when each holds a valid key.
func TestAnAmbiguousAuthorizationIsRefused(t *testing.T) {
	g := newSettleGateway(t, "http://127.0.0.1:1")
	folded := &foldConn{}
	folded.scan.folded.Store(true)
	tests := []struct {
		name     string
		headers  []string
		conn     *foldConn // nil: a connection WatchFolds did not see
		wantCode string
	}{
		{"one", []string{"Bearer " + settleKey}, nil, ""},
		{"one, from a watched connection", []string{"Bearer " + settleKey}, &foldConn{}, ""},
		{"two", []string{"Bearer " + settleKey, "Bearer sk-someone-else"}, nil, "ambiguous_api_key"},
		{"two of the same", []string{"Bearer " + settleKey, "Bearer " + settleKey}, nil, "ambiguous_api_key"},
		{"folded", []string{"Bearer " + settleKey}, folded, "ambiguous_api_key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.conn != nil {
				ctx = ConnContext(ctx, tc.conn)
			}
			r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/models", nil)
			r.Header["Authorization"] = tc.headers
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, r)
			if tc.wantCode == "" {
				if w.Code != http.StatusOK {
					t.Errorf("status %d: %s; want 200", w.Code, w.Body)
				}
				return
			}
			if w.Code != http.StatusUnauthorized || errorCode(t, w) != tc.wantCode {
				t.Errorf("status %d: %s; want 401 %s", w.Code, w.Body, tc.wantCode)
			}
		})
	}
}

// TestFailedAuthenticationsAreSlowedPerAddress checks that an address that keeps failing to
// authenticate is answered 429 past its allowance, before its key is checked, until the allowance
// comes back: a guesser learns one key a second, whatever it sends. Another address is answered
// as ever.
func TestFailedAuthenticationsAreSlowedPerAddress(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	g := newSettleGatewayAt(t, settleConfig("http://127.0.0.1:1"), func() time.Time { return now })
	get := func(addr, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/models", nil)
		r.RemoteAddr = addr
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		return w
	}
	const guesser, other = "203.0.113.7:40000", "198.51.100.1:40000"
	for i := range guessBurst {
		key := "sk-guess-" + strings.Repeat("x", i)
		if i%2 == 1 {
			key = "" // a missing key fails too
		}
		if w := get(guesser, key); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d; want 401 within the allowance", i+1, w.Code)
		}
	}
	steps := []struct {
		name      string
		after     time.Duration
		addr, key string
		want      int
	}{
		{"past the allowance", 0, guesser, "sk-guess", http.StatusTooManyRequests},
		{"the guesser's next port", 0, "203.0.113.7:40001", "sk-guess", http.StatusTooManyRequests},
		{"a valid key from the guesser's address, unchecked", 0, guesser, settleKey, http.StatusTooManyRequests},
		{"a valid key from another address", 0, other, settleKey, http.StatusOK},
		{"a wrong key from another address", 0, other, "sk-guess", http.StatusUnauthorized},
		{"a second later", time.Second, guesser, "sk-guess", http.StatusUnauthorized},
		{"at once again", 0, guesser, "sk-guess", http.StatusTooManyRequests},
		{"a valid key a second later", time.Second, guesser, settleKey, http.StatusOK},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		w := get(s.addr, s.key)
		if w.Code != s.want {
			t.Errorf("%s: status %d: %s; want %d", s.name, w.Code, w.Body, s.want)
		}
		if w.Code == http.StatusTooManyRequests && (w.Header().Get("Retry-After") != "1" || errorCode(t, w) != "too_many_failed_authentications") {
			t.Errorf("%s: Retry-After %q, %s; want 1 and too_many_failed_authentications", s.name, w.Header().Get("Retry-After"), w.Body)
		}
	}
}

func TestClientAddressIsThePeersOrItsIPv6Network(t *testing.T) {
	for remote, want := range map[string]string{
		"203.0.113.7:40000":                  "203.0.113.7",
		"[::ffff:203.0.113.7]:40000":         "203.0.113.7",
		"[2001:db8:1:2:3:4:5:6]:40000":       "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff:ffff:1]:80": "2001:db8:1:2::/64",
		"not an address":                     "not an address",
	} {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "192.0.2.99")
		if got := clientAddress(r); got != want {
			t.Errorf("clientAddress(%q) = %q; want %q", remote, got, want)
		}
	}
}

// errorCode is the code of the OpenAI error body w holds.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Error struct{ Code string } }
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("the answer is not an OpenAI error: %s", w.Body)
	}
	return e.Error.Code
}
