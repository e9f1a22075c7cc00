package v1

import (
	"fmt"
	"os"
	"strings"
)

// ReadAdminToken reads the token of the gateways' admin endpoints from a file
// of its own, such as a mounted Secret's key: the file's content without
// surrounding white space. A gateway run with an admin token file asks every
// caller of its admin port, but for /healthz and /readyz, for
// "Authorization: Bearer TOKEN". The gateway and its callers read the same
// file, each time they use it, so that a Secret's change takes effect. The
// error names the file, never its content.
func ReadAdminToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the admin token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("the admin token file %s is empty", path)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("the admin token file %s holds more than one word; want the token alone", path)
	}
	return token, nil
}
