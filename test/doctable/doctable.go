// Package doctable reads the tables of a README, so that a test can hold each table to the code
// it describes: the errors, headers, flags and metrics.
package doctable

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Rows returns the rows of the tables under heading in the Markdown file path, up to the next
// heading of the same level or higher, each row as its cells, trimmed. The header rows are left
// out.
func Rows(path, heading string) ([][]string, error) {
	lines, err := sectionLines(path, heading)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for i, line := range lines {
		switch {
		case !strings.HasPrefix(line, "|"), isSeparator(line):
		case i+1 < len(lines) && isSeparator(lines[i+1]):
		default:
			rows = append(rows, cells(line))
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("doctable: %s has no table under %q", path, heading)
	}
	return rows, nil
}

// sectionLines returns the lines of path under heading, up to the next heading of its level or
// higher.
func sectionLines(path, heading string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	level := strings.Index(heading, " ")
	var out []string
	in := false
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if n := headingLevel(line); n > 0 && n <= level {
			in = line == heading
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return out, scanner.Err()
}

// headingLevel is the level of a Markdown heading line ("## x" is 2), or 0.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

func isSeparator(line string) bool { return strings.HasPrefix(line, "|---") }

// cells splits a table row into its cells. A cell holds no "|" outside backquotes.
func cells(line string) []string {
	var out []string
	var cell strings.Builder
	quoted := false
	for _, r := range strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|") {
		switch {
		case r == '`':
			quoted = !quoted
		case r == '|' && !quoted:
			out = append(out, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	return append(out, strings.TrimSpace(cell.String()))
}

// quoted matches a span in backquotes.
var quoted = regexp.MustCompile("`([^`]+)`")

// Quoted returns the spans in backquotes of a cell, without the backquotes.
func Quoted(cell string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}
