// Package metricsdoc checks the README's table of metrics, in its section "Metrics and alerts",
// against the series a binary registers: every series has a row, and every row names series that
// are registered.
package metricsdoc

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// section is the heading of the README's section that holds the table.
const section = "## Metrics and alerts"

// seriesName is a series as a row's first cell names it: in backquotes, with or without its
// labels.
var seriesName = regexp.MustCompile("`([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[^`]*\\})?`")

// Documented returns the series the rows of the README's table name, in the order they come.
func Documented(readme string) ([]string, error) {
	f, err := os.Open(readme)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	in := false
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == section
		case in && strings.HasPrefix(line, "| `"):
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
			for _, m := range seriesName.FindAllStringSubmatch(first, -1) {
				names = append(names, m[1])
			}
		}
	}
	if err := lines.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("metricsdoc: %s has no table of metrics under %q", readme, section)
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
