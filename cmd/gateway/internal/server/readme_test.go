package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/doctable"
)

// readme is the gateway's README, which holds the tables of its errors and headers.
const readme = "../../README.md"

// sourceStrings returns the string literals of the package's own sources (not its tests) that
// keep reports true, with the name of the field, the function or the constant they are given to:
// "Code" for an error's code, "badRequest" for its first argument, a constant's name, or "" for
// any other.
func sourceStrings(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			collectStrings(out, n)
			return true
		})
	}
	return out
}

// collectStrings adds the string literals of n to out, under what they are given to.
func collectStrings(out map[string][]string, n ast.Node) {
	add := func(to string, e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out[to] = append(out[to], s)
			}
		}
	}
	switch n := n.(type) {
	case *ast.KeyValueExpr:
		if key, ok := n.Key.(*ast.Ident); ok && key.Name == "Code" {
			add("Code", n.Value)
		}
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" && i < len(n.Rhs) {
				add("Code", n.Rhs[i])
			}
		}
	case *ast.CallExpr:
		if fn, ok := n.Fun.(*ast.Ident); ok && fn.Name == "badRequest" && len(n.Args) > 0 {
			add("badRequest", n.Args[0])
		}
	case *ast.ValueSpec:
		for i, name := range n.Names {
			if i < len(n.Values) {
				add(name.Name, n.Values[i])
			}
		}
	case *ast.BasicLit:
		add("", n)
	}
}

// writtenCodes are the error codes the gateway writes.
func writtenCodes(t *testing.T) []string {
	s := sourceStrings(t)
	codes := slices.Concat(s["Code"], s["badRequest"], s["codeQuotaSpent"], s["codeAccountSpent"])
	slices.Sort(codes)
	return slices.Compact(codes)
}

// statusCode matches an HTTP status in a cell.
var statusCode = regexp.MustCompile(`\b[1-5][0-9][0-9]\b`)

// TestEveryErrorHasARowInTheREADME checks the table of errors in the gateway's README against the
// codes the gateway writes: each has a row and each row's code is one it writes. Each error is
// written as its row says: x-should-retry: false where the row says it is not retried, and
// Retry-After on every 429 and 503.
func TestEveryErrorHasARowInTheREADME(t *testing.T) {
	rows, err := doctable.Rows(readme, "## Errors")
	if err != nil {
		t.Fatal(err)
	}
	written := writtenCodes(t)
	var documented []string
	for _, row := range rows {
		for _, code := range doctable.Quoted(row[2]) {
			documented = append(documented, code)
			if !slices.Contains(written, code) {
				t.Errorf("the README's table of errors names %s, which the gateway does not write", code)
			}
			for _, status := range statusCode.FindAllString(row[0], -1) {
				checkWrittenAsTheRowSays(t, status, code, row[4])
			}
		}
	}
	for _, code := range written {
		if !slices.Contains(documented, code) {
			t.Errorf("the gateway writes the error %s, which has no row in the README's table of errors", code)
		}
	}
}

// checkWrittenAsTheRowSays writes the error of status and code and checks its headers against the
// row's retried cell: "yes..." or "no" (any other says nothing).
func checkWrittenAsTheRowSays(t *testing.T, status, code, retried string) {
	t.Helper()
	n, _ := strconv.Atoi(status)
	w := httptest.NewRecorder()
	(&apiError{status: n, Code: code}).write(w)
	if strings.HasPrefix(retried, "yes") || strings.HasPrefix(retried, "no") {
		if got, want := w.Header().Get("X-Should-Retry") != "false", strings.HasPrefix(retried, "yes"); got != want {
			t.Errorf("%d %s: retried %v; the README says %q", n, code, got, retried)
		}
	}
	if (n == http.StatusTooManyRequests || n == http.StatusServiceUnavailable) && w.Header().Get("Retry-After") == "" {
		t.Errorf("%d %s: no Retry-After", n, code)
	}
}

// TestEveryHeaderHasARowInTheREADME checks the table of headers in the gateway's README against
// the headers the gateway writes, every name of the package's sources that starts with X- or is
// Retry-After: each has a row, and each row names one of them.
func TestEveryHeaderHasARowInTheREADME(t *testing.T) {
	rows, err := doctable.Rows(readme, "## Headers")
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, s := range sourceStrings(t)[""] {
		if name := strings.ToLower(s); strings.HasPrefix(name, "x-") || strings.HasPrefix(name, "retry-after") {
			written = append(written, name)
		}
	}
	var documented []string
	for _, row := range rows {
		for _, name := range doctable.Quoted(row[0]) {
			documented = append(documented, name)
			if !slices.Contains(written, name) {
				t.Errorf("the README's table of headers names %s, which the gateway does not write", name)
			}
		}
	}
	for _, name := range written {
		if !slices.Contains(documented, name) {
			t.Errorf("the gateway writes the header %s, which has no row in the README's table of headers", name)
		}
	}
}
