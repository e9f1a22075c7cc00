package estimate

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// encodingNames are the encodings the Counter knows.
var encodingNames = []string{"cl100k_base", "o200k_base", "p50k_base", "p50k_edit", "r50k_base"}

// The reference is tiktoken-go, whose encoder matches its split patterns with
// a backtracking regular-expression engine; each encoding is loaded once.
var (
	referenceMu        sync.Mutex
	referenceEncodings = map[string]*tiktoken.Tiktoken{}
)

// referenceEncoding returns tiktoken-go's encoder for encoding, read from the
// data compiled in.
func referenceEncoding(tb testing.TB, encoding string) *tiktoken.Tiktoken {
	tb.Helper()
	referenceMu.Lock()
	defer referenceMu.Unlock()
	if tk, ok := referenceEncodings[encoding]; ok {
		return tk
	}
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	tk, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		tb.Fatalf("tiktoken-go: %v", err)
	}
	referenceEncodings[encoding] = tk
	return tk
}

// checkSameTokens fails unless the Counter's split and merge give the tokens
// that tiktoken-go's EncodeOrdinary gives, segment by segment, and Count
// their number.
func checkSameTokens(t *testing.T, encoding, text string) {
	t.Helper()
	e := counter.encoder(encoding)
	if e == nil {
		t.Fatalf("encoding %s did not load", encoding)
	}
	tk := referenceEncoding(t, encoding)
	valid := strings.ToValidUTF8(text, string(utf8.RuneError))
	var want int64
	for rest := valid; rest != ""; {
		cut := cutPoint(rest)
		segment := rest[:cut]
		rest = rest[cut:]
		ref := tk.EncodeOrdinary(segment)
		if got := tokens(e, segment); !slices.Equal(got, ref) {
			t.Fatalf("%s: tokens of %q = %v, tiktoken-go gives %v", encoding, segment, got, ref)
		}
		want += int64(len(ref))
	}
	if got := counter.Count(encoding, text); got != want {
		t.Fatalf("%s: Count(%q) = %d, tiktoken-go gives %d", encoding, text, got, want)
	}
}

// tokens returns the tokens of segment, split and merged as Count does.
func tokens(e *encoder, segment string) []int {
	var ids []int
	for segment != "" {
		end := e.split(segment)
		piece := segment[:end]
		segment = segment[end:]
		if id, ok := e.ranks.rank(piece); ok {
			ids = append(ids, id)
			continue
		}
		parts := mergeParts(piece, e.ranks, nil)
		for i := range len(parts) - 1 {
			id, _ := e.ranks.rank(piece[parts[i].start:parts[i+1].start])
			ids = append(ids, id)
		}
	}
	return ids
}

// corpus is varied text for comparing the Counter with tiktoken-go.
var corpus = []string{
	"",
	"hello world",
	"The quick brown fox jumps over the lazy dog.",
	"He said: \"it's, they're, we've, I'm, you'll, he'd\" — IT'S THEY'RE WE'VE I'M YOU'LL HE'D. 'tis 'Twas",
	"don't WON'T Shouldn'T it'S o'clock rock'n'roll '' 's 'x 'r 're 'RE 'lL 'll' ''s",
	"func f(x int) int {\n\treturn x*2 // ok\n}\n\n\n  if a != b && c <= d {\r\n\t\tpanic(\"no\")\r\n  }\n",
	"def f(xs):\n    return [x ** 2 for x in xs if x % 3 == 0]  # squares\n",
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":512,"stream":true,"n":1e-9}`,
	"a/b/c //comment /// http://example.com/path?q=1&r=2#frag C:\\dir\\file.txt ./../x",
	"+\n/ +\r\n// ;;\n\n/ !?/\r/\n",
	"Grüße, мир и お誕生日おめでとう 生日快乐 생일 축하합니다 नमस्ते दुनिया مرحبا بالعالم שלום עולם",
	"Ελληνικά ΚΕΦΑΛΑΙΑ ǅungla ǈ ǋ ᾈ ΣΊΣΥΦΟΣ ﬁne ﬀ Straße STRASSE İstanbul ıi",
	"emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ ☃︎ ✔️",
	"combining: e\u0301 a\u0308 n\u0303 \u0301\u0301\u0301 x\u20dd Å Å क्षि",
	"numbers 1 12 123 1234 12345 3.14159 1,000,000 ١٢٣٤٥ ¼½¾ ²³ Ⅻ ⑤ 一二三",
	strings.Repeat("a", 3000),
	strings.Repeat("ab", 1500),
	strings.Repeat("お誕生日おめでとう", 200),
	strings.Repeat("x=1;", 600),
	strings.Repeat(" ", 2000) + "x" + strings.Repeat("\t", 300),
	"   leading and trailing   ",
	"spaces  \t\n  \n\r\n \u00a0\u2003\u3000mixed\u0085\u2028\u2029\v\f end  ",
	"\n\n\n\n\r\r\r \n \n x",
	"<|endoftext|> <|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|> plain <|im_start|>user",
	"invalid \xff\xfe bytes \xc3 and \xe2\x82 cut \xed\xa0\x80 surrogate \xf4\x90\x80\x80 high",
	"U+FFFD \ufffd\ufffd zero-width \u200b\u200c\u200d\ufeff bidi \u202e\u2066",
	"aGVsbG8gd29ybGQ=" + strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0123456789+/", 40),
	"ABCdef GHIjkl MNOP qrST uVwX yZ HTTPServer XMLHttpRequest iPhone eBay McDonald's O'Neil",
	"ʰʲʷ ˈɪŋɡlɪʃ ªº ⅰⅱ ꜰ ᴀʙᴄ",
}

func TestCountMatchesTiktoken(t *testing.T) {
	for _, enc := range encodingNames {
		t.Run(enc, func(t *testing.T) {
			for _, text := range corpus {
				checkSameTokens(t, enc, text)
			}
			for _, text := range longTexts() {
				checkSameTokens(t, enc, text)
			}
		})
	}
}

// TestCountMatchesTiktokenOnLongPieces compares texts whose pieces fill a
// segment, which a merger merges, segment by segment.
func TestCountMatchesTiktokenOnLongPieces(t *testing.T) {
	for _, enc := range encodingNames {
		t.Run(enc, func(t *testing.T) {
			for _, tc := range sizedTexts(3000) {
				checkSameTokens(t, enc, tc.text)
			}
		})
	}
}

// longTexts are texts longer than a segment, with and without places to cut.
func longTexts() []string {
	var mixed strings.Builder
	for i := range 200 {
		mixed.WriteString(corpus[i%len(corpus)])
	}
	return []string{
		mixed.String(),
		strings.Repeat(corpus[2]+" ", 100),
		strings.Repeat(corpus[5], 60),
		strings.Repeat(corpus[10], 30),
		strings.Repeat(corpus[12], 30),
	}
}

// TestCountMatchesTiktokenOnRuneTriples compares every string of three runes
// drawn from representatives of each class the split patterns tell apart.
func TestCountMatchesTiktokenOnRuneTriples(t *testing.T) {
	runes := representativeRunes()
	for _, enc := range []string{"cl100k_base", "o200k_base", "r50k_base"} {
		t.Run(enc, func(t *testing.T) {
			for _, a := range runes {
				for _, b := range runes {
					for _, c := range runes {
						checkSameTokens(t, enc, string([]rune{a, b, c}))
					}
				}
			}
		})
	}
}

// representativeRunes returns the ASCII runes the patterns name, and the
// first two runes of each class outside ASCII.
func representativeRunes() []rune {
	runes := []rune(" \t\n\r'/sStTrReEvVmMlLdDaA1.")
	seen := map[class]int{}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if c := classOf(r); seen[c] < 2 {
			seen[c]++
			runes = append(runes, r)
		}
	}
	return runes
}

// TestClassOf checks each rune's class against the Unicode tables that the
// split patterns name.
func TestClassOf(t *testing.T) {
	in := func(r rune, tables ...*unicode.RangeTable) bool { return unicode.In(r, tables...) }
	for r := rune(0); r <= unicode.MaxRune; r++ {
		var want class
		if unicode.IsSpace(r) {
			want |= space
		}
		if r == '\r' || r == '\n' {
			want |= newline
		}
		if in(r, unicode.L) {
			want |= letter
		}
		if in(r, unicode.N) {
			want |= number
		}
		if in(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M) {
			want |= upper
		}
		if in(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M) {
			want |= lower
		}
		if got := classOf(r); got != want {
			t.Fatalf("classOf(%U) = %06b, want %06b", r, got, want)
		}
	}
}

// TestContractionFolding checks the runes that lower to a letter of a
// contraction: only ASCII ones do, so (?i:…) matches ASCII only.
func TestContractionFolding(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if l := unicode.ToLower(r); l < utf8.RuneSelf && strings.ContainsRune("stmdrevl", l) {
			for _, enc := range []string{"cl100k_base", "o200k_base"} {
				checkSameTokens(t, enc, "x'"+string(r)+"x")
			}
		}
	}
}

func FuzzCountMatchesTiktoken(f *testing.F) {
	for i, text := range corpus {
		f.Add(byte(i), text)
	}
	f.Fuzz(func(t *testing.T, encoding byte, text string) {
		checkSameTokens(t, encodingNames[int(encoding)%len(encodingNames)], text)
	})
}

// FuzzCountMatchesTiktokenOnRunes compares texts made of the representative
// runes, which reach the patterns' rarer paths sooner than random bytes do.
func FuzzCountMatchesTiktokenOnRunes(f *testing.F) {
	f.Add(byte(0), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add(byte(1), []byte{60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74})
	runes := representativeRunes()
	f.Fuzz(func(t *testing.T, encoding byte, picks []byte) {
		text := make([]rune, len(picks))
		for i, p := range picks {
			text[i] = runes[int(p)%len(runes)]
		}
		checkSameTokens(t, encodingNames[int(encoding)%len(encodingNames)], string(text))
	})
}
