package ladder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSetAndString(t *testing.T) {
	var l Ladder
	if err := l.Set("1, 2,5"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Ladder{1, 2, 5}, l); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	if got := l.String(); got != "1,2,5" {
		t.Errorf("String = %q; want %q", got, "1,2,5")
	}
	if err := l.Set("1,x"); err == nil {
		t.Error("Set(\"1,x\") succeeded; want an error")
	}
}

func TestIncreasing(t *testing.T) {
	cases := []struct {
		l    Ladder
		want bool
	}{
		{Ladder{1, 2, 3}, true},
		{Ladder{500, 2000}, true},
		{nil, false},
		{Ladder{0, 1}, false},
		{Ladder{1, 1}, false},
		{Ladder{3, 2}, false},
	}
	for _, tc := range cases {
		if got := tc.l.Increasing(); got != tc.want {
			t.Errorf("%v.Increasing() = %v; want %v", tc.l, got, tc.want)
		}
	}
}
