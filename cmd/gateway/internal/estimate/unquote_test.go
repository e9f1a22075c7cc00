package estimate

import (
	"encoding/json"
	"testing"
)

// unquoteSeeds are JSON strings with every escape, surrogates paired and lone, invalid UTF-8,
// and values that are not JSON strings.
var unquoteSeeds = []string{
	`""`, `"plain"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud83d"`,
	`"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"caf` + "\xe9" + `"`, `"` + "\xf0\x9f\x98" + `"`,
	`"é 中 😀"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"a` + "\n" + `b"`, `"a"b"`, `"\"`, `"`, `1`, `null`, ``,
}

// TestUnquote decodes JSON strings as encoding/json does, and refuses what it refuses.
func TestUnquote(t *testing.T) {
	for _, raw := range unquoteSeeds {
		checkUnquote(t, []byte(raw))
	}
}

func FuzzUnquote(f *testing.F) {
	for _, raw := range unquoteSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(checkUnquote)
}

// checkUnquote fails unless unquote reads raw as encoding/json reads it into a string, or
// refuses it where encoding/json does. A value that is not a JSON string itself (null, which
// encoding/json reads as nothing, or a string with space around it) unquote refuses.
func checkUnquote(t *testing.T, raw []byte) {
	var want string
	wantErr := json.Unmarshal(raw, &want)
	got, ok := unquote(raw)
	isString := len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"'
	switch {
	case !isString && ok:
		t.Errorf("unquote(%q) = %q; want it refused, as no JSON string", raw, got)
	case !isString:
	case wantErr == nil && !ok:
		t.Errorf("unquote(%q) refused it; encoding/json reads %q", raw, want)
	case wantErr != nil && ok:
		t.Errorf("unquote(%q) = %q; encoding/json refuses it: %v", raw, got, wantErr)
	case ok && string(got) != want:
		t.Errorf("unquote(%q) = %q; encoding/json reads %q", raw, got, want)
	}
}
