package v1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func TestReadAdminToken(t *testing.T) {
	for _, tc := range []struct {
		name, content, want, err string
	}{
		{name: "a Secret's key", content: "s3cret", want: "s3cret"},
		{name: "a line", content: "s3cret\n", want: "s3cret"},
		{name: "empty", content: " \n", err: "is empty"},
		{name: "two words", content: "s3cret other", err: "more than one word"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := gatewayv1.ReadAdminToken(path)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ReadAdminToken = %q, %v; want %q, an error with %q", got, err, tc.want, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error %q shows the token", err)
			}
		})
	}
	if _, err := gatewayv1.ReadAdminToken(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadAdminToken of a missing file: no error")
	}
}
