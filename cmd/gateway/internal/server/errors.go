package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiError is an answer in OpenAI's error body, {"error":{"message","type","param","code"}}.
type apiError struct {
	status int
	// retryAfter, when set, goes out as the Retry-After header.
	retryAfter time.Duration
	Message    string  `json:"message"`
	Type       string  `json:"type"`
	Param      *string `json:"param"`
	Code       string  `json:"code"`
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
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(retryAfter(e.retryAfter)/time.Second), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}
