package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is an answer in OpenAI's error body,
// {"error":{"message","type","param","code"}}, with its HTTP status. It is
// also an error, so request parsing can return it.
type Error struct {
	// Status is the HTTP status of the answer.
	Status int
	// Message says what went wrong, for a person.
	Message string
	// Type is the error's type, such as "invalid_request_error" or "tokens".
	Type string
	// Param names the request field at fault; empty writes null.
	Param string
	// Code is OpenAI's machine-readable code; empty writes null.
	Code string
}

// Error returns the message, prefixed with the package.
func (e *Error) Error() string { return "openai: " + e.Message }

// Write answers w with e. Headers set on w before, such as the rate-limit
// headers, are kept.
func (e *Error) Write(w http.ResponseWriter) {
	body := struct {
		Error errorBody `json:"error"`
	}{errorBody{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}}
	WriteJSON(w, e.Status, body)
}

type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// nullable is s, or nil (JSON null) when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// InvalidRequest is a 400 about param (empty for the body itself).
func InvalidRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// UnknownModel is the 400 for a model the server does not serve.
func UnknownModel(model string) *Error {
	e := InvalidRequest("model", "The model `%s` does not exist or you do not have access to it.", model)
	e.Code = "model_not_found"
	return e
}

// ResponseNotFound is the 404 for a response id the server does not keep.
func ResponseNotFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// PreviousResponseNotFound is the 404 for a previous_response_id the server
// does not keep.
func PreviousResponseNotFound(id string) *Error {
	return &Error{
		Status:  http.StatusNotFound,
		Type:    "invalid_request_error",
		Param:   "previous_response_id",
		Code:    "previous_response_not_found",
		Message: fmt.Sprintf("Previous response with id '%s' not found.", id),
	}
}

// InvalidAPIKey is the 401 for a missing or wrong API key.
func InvalidAPIKey() *Error {
	return &Error{
		Status:  http.StatusUnauthorized,
		Type:    "invalid_request_error",
		Code:    "invalid_api_key",
		Message: "Incorrect API key provided. You can find your API key in the lab's configuration.",
	}
}

// InvalidURL is the 404 for a path or method the server does not serve.
func InvalidURL(r *http.Request) *Error {
	return &Error{
		Status:  http.StatusNotFound,
		Type:    "invalid_request_error",
		Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
	}
}

// WriteJSON answers w with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent: a client that left cannot be told anything more.
	_ = json.NewEncoder(w).Encode(v)
}
