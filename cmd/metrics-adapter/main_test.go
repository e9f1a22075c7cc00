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

func TestParseSelector(t *testing.T) {
	if s, err := parseSelector(""); s != nil || err != nil {
		t.Errorf("parseSelector(\"\") = %v, %v; want no selector", s, err)
	}
	s, err := parseSelector("app.kubernetes.io/name=sluice-gateway")
	if err != nil || s.String() != "app.kubernetes.io/name=sluice-gateway" {
		t.Errorf("parseSelector = %v, %v", s, err)
	}
	for _, bad := range []string{"app in (", "!!", ","} {
		if _, err := parseSelector(bad); err == nil {
			t.Errorf("parseSelector(%q) succeeded; want an error", bad)
		}
	}
}
