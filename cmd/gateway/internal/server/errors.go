package server

import (
	"encoding/json"
	"net/http"
)

// apiError is an answer in OpenAI's error body, {"error":{"message","type","param","code"}}.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// The error types clients branch on, as OpenAI names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "api_error"
)

func badRequest(code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: message}
}

// write sends the error. Headers already set on w (rate limits, Retry-After) go with it.
func (e *apiError) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}
