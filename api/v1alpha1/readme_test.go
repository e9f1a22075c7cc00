package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/test/doctable"
)

// declaredReasons reads conditions.go and returns each reason as "Condition/Reason": a Reason*
// constant belongs to the Condition* constant declared last before it.
func declaredReasons(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	condition := ""
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			name, value := constant(spec.(*ast.ValueSpec))
			switch {
			case strings.HasPrefix(name, "Condition"):
				condition = value
			case strings.HasPrefix(name, "Reason"):
				out = append(out, condition+"/"+value)
			}
		}
	}
	slices.Sort(out)
	return out
}

// constant is the name and string value of a one-name constant; empty for any other.
func constant(spec *ast.ValueSpec) (name, value string) {
	if len(spec.Names) != 1 || len(spec.Values) != 1 {
		return "", ""
	}
	lit, ok := spec.Values[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", ""
	}
	value, _ = strconv.Unquote(lit.Value)
	return spec.Names[0].Name, value
}

// TestEveryConditionReasonHasARowInTheREADME checks the README's table of conditions against the
// reasons conditions.go declares: each has a row under its condition, and each row is one of them.
func TestEveryConditionReasonHasARowInTheREADME(t *testing.T) {
	rows, err := doctable.Rows("README.md", "## Conditions")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, row := range rows {
		documented = append(documented, strings.Trim(row[0], "`")+"/"+strings.Trim(row[1], "`"))
	}
	slices.Sort(documented)
	if diff := cmp.Diff(documented, declaredReasons(t)); diff != "" {
		t.Errorf("the README's conditions and reasons (-documented +declared):\n%s", diff)
	}
}
