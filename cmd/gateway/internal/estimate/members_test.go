package estimate

import "testing"

func TestStringEnd(t *testing.T) {
	tests := []struct {
		body string
		want int
	}{
		{`"abc",`, 5},
		{`""`, 2},
		{`"a\"b"x`, 6},
		{`"a\\"b"`, 5},
		{`"a\\\"b"`, 8},
		{`"\\\\"`, 6},
		{`"\u0022"`, 8},
		{`"abc`, -1},
		{`"abc\"`, -1},
		{`"`, -1},
	}
	for _, tc := range tests {
		if got := stringEnd([]byte(tc.body), 0); got != tc.want {
			t.Errorf("stringEnd(%s) = %d; want %d", tc.body, got, tc.want)
		}
	}
}
