package anthropic

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// RequestIDHeader is the header that carries an answer's request id, which
// its error body repeats.
const RequestIDHeader = "request-id"

// NewRequestID is a new request id, "req_" and random hex digits.
func NewRequestID() string { return openai.NewID("req_") }

// StatusOverloaded is the status of Anthropic's overloaded_error: 529,
// which net/http does not name.
const StatusOverloaded = 529

// Error is an answer in Anthropic's error body,
// {"type":"error","error":{"type","message"},"request_id"}, with its HTTP
// status. It is also an error, so request parsing can return it.
type Error struct {
	// Status is the HTTP status of the answer.
	Status int
	// Type is the error's type, such as "invalid_request_error".
	Type string
	// Message says what went wrong, for a person.
	Message string
}

// Error returns the message, prefixed with the package.
func (e *Error) Error() string { return "anthropic: " + e.Message }

// Write answers w with e. Its request_id is the request-id header already
// set on w; headers set before, such as the rate-limit headers, are kept.
func (e *Error) Write(w http.ResponseWriter) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	body := struct {
		Type      string `json:"type"`
		Error     detail `json:"error"`
		RequestID string `json:"request_id"`
	}{"error", detail{e.Type, e.Message}, w.Header().Get(RequestIDHeader)}
	openai.WriteJSON(w, e.Status, body)
}

// InvalidRequest is a 400 invalid_request_error.
func InvalidRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

// Authentication is the 401 for a missing or wrong x-api-key.
func Authentication() *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key"}
}

// NotFound is a 404 not_found_error.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: fmt.Sprintf(format, args...)}
}

// UnknownModel is the 404 for a model the server does not serve.
func UnknownModel(model string) *Error { return NotFound("model: %s", model) }

// TooLarge is the 413 for a body larger than [MaxBodyBytes].
func TooLarge() *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}
}

// RateLimited is a 429 rate_limit_error that says msg.
func RateLimited(msg string) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: msg}
}

// Overloaded is the 529 for a provider with no room for another call.
func Overloaded() *Error {
	return &Error{Status: StatusOverloaded, Type: "overloaded_error", Message: "Overloaded"}
}
