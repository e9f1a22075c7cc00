package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
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

// errorCode is the code of the OpenAI error body w holds.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Error struct{ Code string } }
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("the answer is not an OpenAI error: %s", w.Body)
	}
	return e.Error.Code
}
