package labrun

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteTable(t *testing.T) {
	var out bytes.Buffer
	type result struct {
		rate        int
		target, p50 string
	}
	results := []result{{500, "stub", "0.200ms"}, {2000, "gateway", "12.000ms"}}
	row := func(r result) string { return fmt.Sprintf("%d\t%s\t%s", r.rate, r.target, r.p50) }
	if err := WriteTable(&out, "rate/s\ttarget\tp50", results, row, "note: as it is\tno columns\n"); err != nil {
		t.Fatal(err)
	}
	want := "rate/s  target   p50\n" +
		"500     stub     0.200ms\n" +
		"2000    gateway  12.000ms\n" +
		"note: as it is\tno columns\n"
	if diff := cmp.Diff(out.String(), want); diff != "" {
		t.Errorf("table (-got +want):\n%s", diff)
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	v := struct {
		Rates []int  `json:"rates"`
		Case  string `json:"case"`
	}{[]int{500, 2000}, "queue"}
	if err := WriteJSON(path, v); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"rates\": [\n    500,\n    2000\n  ],\n  \"case\": \"queue\"\n}\n"
	if diff := cmp.Diff(string(got), want); diff != "" {
		t.Errorf("file (-got +want):\n%s", diff)
	}
}

func TestWriteJSONRefusesWhatJSONCannotHold(t *testing.T) {
	if err := WriteJSON(filepath.Join(t.TempDir(), "report.json"), func() {}); err == nil {
		t.Error("WriteJSON of a func = nil error; want one")
	}
}
