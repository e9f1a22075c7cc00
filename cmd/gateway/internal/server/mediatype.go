package server

import (
	"mime"
	"net/http"
	"strings"
)

// jsonContentType is what every call's body is to its provider: JSON, in UTF-8, the bytes the
// gateway checked.
var jsonContentType = []string{"application/json"}

// contentTypeError refuses a call whose client declared its body something else than JSON in
// UTF-8: another media type, another charset, or two Content-Type headers. A provider that
// honours a charset would read other text than the gateway checked. A call without a
// Content-Type is read as JSON: the SDKs always send one, curl may not.
func contentTypeError(h http.Header) *apiError {
	values := h["Content-Type"]
	if len(values) == 0 {
		return nil
	}
	if len(values) == 1 && isJSONUTF8(values[0]) {
		return nil
	}
	return &apiError{status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: "unsupported_media_type",
		Message: "The request body must be JSON in UTF-8: send one 'Content-Type: application/json' header, with no charset or charset=utf-8."}
}

// isJSONUTF8 reports whether a Content-Type names JSON, in UTF-8 or with no charset (JSON's own
// encoding is UTF-8, RFC 8259). Media types and charsets compare without regard to case.
func isJSONUTF8(contentType string) bool {
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil || media != "application/json" {
		return false
	}
	charset, ok := params["charset"]
	return !ok || strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "utf8")
}

// isEventStream reports whether an answer's Content-Type is text/event-stream, whatever its
// case and parameters: media types compare without regard to case (RFC 9110, section 8.3.1).
func isEventStream(h http.Header) bool {
	media, _, _ := strings.Cut(headerValue(h, "Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(media), "text/event-stream")
}
