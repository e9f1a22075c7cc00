package estimate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// The kinds of refusal. A [*RequestError] wraps exactly one of them; test with
// errors.Is. Each one answers the client with a 400.
var (
	// ErrMalformedJSON means the body is not valid JSON.
	ErrMalformedJSON = errors.New("estimate: malformed JSON")
	// ErrMissingModel means the body has no model, or an empty one.
	ErrMissingModel = errors.New("estimate: missing model")
	// ErrWrongType means a field has a JSON type the API does not accept.
	ErrWrongType = errors.New("estimate: wrong type")
	// ErrInvalidValue means a field has the right type but a value out of
	// range, such as a negative max_tokens.
	ErrInvalidValue = errors.New("estimate: invalid value")
	// ErrAmbiguousKey means an object holds a key the package reads twice, or spelt with other
	// cases than the API's: providers would not all read it as the package does.
	ErrAmbiguousKey = errors.New("estimate: ambiguous key")
	// ErrUnsupportedField means the body holds a field another endpoint reads, such as the
	// Responses API's max_output_tokens in a chat request.
	ErrUnsupportedField = errors.New("estimate: unsupported field")
	// ErrControlKey means an object holds a key with a control character in it, such as
	// "model\u0000": a reader that stops at a NUL, or drops what it cannot print, would read
	// another key than the package does.
	ErrControlKey = errors.New("estimate: control character in a key")
)

// RequestError is why a request body was refused. It carries field names and
// offsets only, never content from the body, so it is safe to log and to
// return to the client.
type RequestError struct {
	// Err is one of the Err sentinels of this package.
	Err error
	// Param is the path of the field at fault, as in OpenAI's error body:
	// "max_tokens", "messages[2].content[0].text". Empty for the body itself.
	Param string
	// Offset is the byte offset in the body where the JSON became invalid.
	// It is set only for ErrMalformedJSON.
	Offset int64
	// Want describes what the field must be: a JSON type for ErrWrongType,
	// a range for ErrInvalidValue.
	Want string
}

// Error returns a message naming the field at fault and what it must be.
func (e *RequestError) Error() string {
	switch {
	case errors.Is(e.Err, ErrMalformedJSON):
		return fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
	case e.Want == "":
		return e.Err.Error()
	case e.Param == "":
		return fmt.Sprintf("%v for the body: must be %s", e.Err, e.Want)
	}
	return fmt.Sprintf("%v for %s: must be %s", e.Err, e.Param, e.Want)
}

// Unwrap returns the sentinel, for errors.Is.
func (e *RequestError) Unwrap() error { return e.Err }

// wrongType refuses a field whose JSON type is not want.
func wrongType(want string) error {
	return &RequestError{Err: ErrWrongType, Want: want}
}

// fromJSON turns an error from encoding/json into a RequestError. Nested
// decodes see only valid JSON, so syntax errors carry offsets into the body.
func fromJSON(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return &RequestError{Err: ErrMalformedJSON, Offset: syntax.Offset}
	case errors.As(err, &typ):
		// encoding/json names the embedded options structs in the path.
		param := strings.TrimPrefix(strings.TrimPrefix(typ.Field, "options."), "chatOptions.")
		return &RequestError{Err: ErrWrongType, Param: param, Want: jsonType(typ.Type)}
	}
	return &RequestError{Err: ErrMalformedJSON}
}

// jsonType names the JSON type that decodes into t.
func jsonType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// within places the field at fault in err under parent, so that errors are
// built bottom-up and paths cost nothing when nothing fails.
func within(parent string, err error) error {
	if err == nil {
		return nil
	}
	return placed(parent, err)
}

// placed is within for an error, kept apart so that within, inlined, allocates nothing when
// there is none.
func placed(parent string, err error) error {
	var re *RequestError
	if !errors.As(err, &re) || errors.Is(re.Err, ErrMalformedJSON) {
		return err
	}
	switch {
	case re.Param == "":
		re.Param = parent
	case re.Param[0] == '[':
		re.Param = parent + re.Param
	default:
		re.Param = parent + "." + re.Param
	}
	return err
}
