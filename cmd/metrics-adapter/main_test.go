package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGateways(t *testing.T) {
	got, err := parseGateways([]string{"ai=http://10.0.0.1:9090/admin/usage", "ai=http://10.0.0.2:9090/admin/usage", "ml=https://gw.ml/admin/usage"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"ai": {"http://10.0.0.1:9090/admin/usage", "http://10.0.0.2:9090/admin/usage"},
		"ml": {"https://gw.ml/admin/usage"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseGateways (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"http://10.0.0.1:9090/admin/usage", "=http://x/admin/usage", "ai=10.0.0.1:9090"} {
		if _, err := parseGateways([]string{bad}); err == nil {
			t.Errorf("parseGateways(%q) succeeded; want an error", bad)
		}
	}
}
