package estimate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestPlainString checks that plainString reads a string as encoding/json does, and leaves to
// it the strings it does not read.
func TestPlainString(t *testing.T) {
	tests := []struct {
		raw    string
		wantOK bool
	}{
		{`""`, true},
		{`"Say hello."`, true},
		{`"お誕生日おめでとう <b>&</b>"`, true},
		{`"a \"quote\""`, false},
		{`"\u00e9"`, false},
		{`"a\\b"`, false},
		{"\"\xff\xfe\"", false}, // encoding/json puts U+FFFD in place of invalid UTF-8
		{`"a" `, false},
		{`null`, false},
		{`["a"]`, false},
	}
	for _, tc := range tests {
		got, ok := plainString([]byte(tc.raw))
		if ok != tc.wantOK {
			t.Errorf("plainString(%s) reports %v, want %v", tc.raw, ok, tc.wantOK)
		}
		var want string
		if ok && (json.Unmarshal([]byte(tc.raw), &want) != nil || got != want) {
			t.Errorf("plainString(%s) = %q; encoding/json reads %q", tc.raw, got, want)
		}
	}
}

func FuzzPlainString(f *testing.F) {
	f.Add([]byte(`"Say hello."`))
	f.Add([]byte("\"caf\xc3\xa9\""))
	f.Add([]byte(`"\n"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the package reads only values of a body that decoded
		}
		got, ok := plainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil || got != want {
			t.Errorf("plainString(%q) = %q; encoding/json reads %q, %v", raw, got, want, err)
		}
	})
}

// TestElementsAreWhatDecodingGives splits arrays as encoding/json decodes them into
// []json.RawMessage, and refuses what it refuses.
func TestElementsAreWhatDecodingGives(t *testing.T) {
	for _, raw := range []string{
		`[]`, `[ ]`, `["a"]`, ` [ "a" , "b\"]" ,"c" ] `, `[1,2,3]`, `[ -1.5e3 , true,false , null ]`, `[[1,2],[3]]`,
		`[{"a":[1,"]"]},"x"]`, `[1,]`, `[`, `["a"`, `{"a":1}`, `"a"`, `[1 2]`,
	} {
		var want []json.RawMessage
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := elements(json.RawMessage(raw))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("elements(%s) error %v; encoding/json's %v", raw, err, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("elements(%s) = %q; encoding/json decodes %q", raw, got, want)
		}
	}
}
