// Package metricsdoc checks the table of metrics of config/README.md, in its section "Metrics and
// alerts", against the series a binary registers: every series has a row, and every row names
// series that are registered.
package metricsdoc

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/doctable"
)

// section is the heading of the section that holds the table.
const section = "## Metrics and alerts"

// Documented returns the series the rows of the table name in their first cell, in backquotes,
// with or without their labels, in the order they come.
func Documented(readme string) ([]string, error) {
	rows, err := doctable.Rows(readme, section)
	if err != nil {
		return nil, fmt.Errorf("metricsdoc: %w", err)
	}
	var names []string
	for _, row := range rows {
		for _, q := range doctable.Quoted(row[0]) {
			name, _, _ := strings.Cut(q, "{")
			names = append(names, name)
		}
	}
	return names, nil
}

// fqName reads the name of a series from its descriptor's String, as client_golang and
// component-base write it: Desc{fqName: "name", ...}.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// NameOf is the name of the series a descriptor describes, or "".
func NameOf(desc fmt.Stringer) string {
	if m := fqName.FindStringSubmatch(desc.String()); m != nil {
		return m[1]
	}
	return ""
}

// Check fails t for each series of registered whose name has one of prefixes and no row in the
// README's table, and for each series a row names, with one of prefixes, that is not registered.
func Check(t testing.TB, readme string, registered []string, prefixes ...string) {
	t.Helper()
	documented, err := Documented(readme)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(name string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	for _, name := range registered {
		if ours(name) && !slices.Contains(documented, name) {
			t.Errorf("%s is registered and has no row in the README's table of metrics", name)
		}
	}
	for _, name := range documented {
		if ours(name) && !slices.Contains(registered, name) {
			t.Errorf("the README's table of metrics names %s, which is not registered", name)
		}
	}
}
