package estimate

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are bodies on the edges of JSON's grammar, valid and not.
var validCases = []string{
	``, ` `, `{}`, ` {} `, "\t\r\n[]\n", `{`, `}`, `[`, `]`, `{]`, `[}`, `{}{}`, `{} x`, `[1,]`, `[,1]`, `{,}`,
	`{"a":1,}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,{"b":null}],"c":"d"}`,
	`"abc"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9\uD83D\uDE00"`, `"\u00e"`, `"\u00eg"`, `"\x"`, `"\`, `"abc`,
	"\"a\x01b\"", "\"a\x1fb\"", "\"a\x7fb\"", "\"\xff\xfe\"", `"é😀"`,
	`0`, `-0`, `01`, `-01`, `1.`, `1.5`, `.5`, `-`, `-a`, `1e`, `1e+`, `1e+5`, `1E-05`, `1.5e3`, `123456789012345678901234567890`,
	`+1`, `0x1`, `1.e5`, `1e5.5`, `tru`, `true`, `truex`, `false`, `fals`, `null`, `nul`, `True`, `NaN`,
	`[true,false,null]`, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`,
	strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting),
	strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1),
	strings.Repeat(`{"a":`, maxNesting) + "1" + strings.Repeat("}", maxNesting),
	strings.Repeat(`{"a":`, maxNesting+1) + "1" + strings.Repeat("}", maxNesting+1),
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range validCases {
		if got, want := valid([]byte(body)), json.Valid([]byte(body)); got != want {
			t.Errorf("valid(%.60q) = %t; json.Valid says %t", body, got, want)
		}
	}
}

// TestValidFindsEachByteThatEndsAPlainRun puts a byte that may end a string's plain run at
// every place of a string longer than two words of eight bytes.
func TestValidFindsEachByteThatEndsAPlainRun(t *testing.T) {
	for _, c := range []byte{0x00, 0x01, 0x1f, 0x20, '"', '\\', '/', 0x7f, 0x80, 0xa2, 0xdc, 0xff} {
		for at := range 20 {
			body := []byte(`"` + strings.Repeat("a", 20) + `"`)
			body[1+at] = c
			if got, want := valid(body), json.Valid(body); got != want {
				t.Errorf("valid(%q) = %t; json.Valid says %t", body, got, want)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, body := range validCases {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := valid(body), json.Valid(body); got != want {
			t.Errorf("valid(%q) = %t; json.Valid says %t", body, got, want)
		}
	})
}

// BenchmarkValid measures valid and json.Valid on a chat of a long transcript, mostly string.
func BenchmarkValid(b *testing.B) {
	body, err := json.Marshal(map[string]any{"model": "m", "max_tokens": 16, "messages": []map[string]string{
		{"role": "user", "content": strings.Repeat("the lab has one big red cat and ", 5000)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"valid", valid}, {"encoding-json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !v.valid(body) {
					b.Fatal("not valid")
				}
			}
		})
	}
}
