package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// One reading of a body.
//
// encoding/json matches a key to a struct field without regard to case and keeps the last of
// keys that repeat. The provider that receives the same bytes may match case (Python's json
// does) and keep the first or the last. In an object the package reads, a key that repeats, or
// that differs from a field's name only in case, would mean one thing to the package and
// another to some provider: read refuses it. What read lets through, every reader reads alike.

// read decodes raw into v, a pointer to a struct, and checks its keys (see checkKeys).
func read(raw []byte, v any) (int64, error) {
	if err := decode(raw, v); err != nil {
		return 0, err
	}
	return checkKeys(raw, v)
}

// checkKeys walks raw, which decoded into v, once more: it refuses the keys that are ambiguous,
// or that another endpoint reads (see objectRule), in every object decoded into a struct, and
// returns the tokens of the keys nothing reads in the objects whose rule counts them, each
// counted as its name and JSON text by the proxy.
func checkKeys(raw []byte, v any) (int64, error) {
	w := walker{body: raw}
	err := w.value(reflect.TypeOf(v).Elem())
	return w.unread, err
}

// objectRule is how the package reads an object of one struct type beyond its fields.
type objectRule struct {
	// counted makes each key that no field reads count as its JSON text, unless free holds it.
	counted bool
	// free holds the keys that add nothing to the prompt: sampling and output settings,
	// streaming, metadata the provider stores.
	free map[string]bool
	// foreign holds the keys another endpoint reads and this one refuses, each with the text
	// that names the field to use instead.
	foreign map[string]string
}

// objectKind is a struct type's fields, by their JSON names, and its rule.
type objectKind struct {
	objectRule
	fields []field
}

// field is one field of a struct as encoding/json names it.
type field struct {
	name  string
	bytes []byte // name, to match keys without making strings of them
	typ   reflect.Type
}

// kinds caches objectKinds by type.
var kinds sync.Map

// kindOf returns the fields and rule of struct type t.
func kindOf(t reflect.Type) *objectKind {
	if k, ok := kinds.Load(t); ok {
		return k.(*objectKind)
	}
	k := &objectKind{objectRule: objectRules[t], fields: fieldsOf(t)}
	if len(k.fields) > 64 {
		panic("estimate: " + t.String() + " has more fields than a walk tells apart")
	}
	kinds.Store(t, k)
	return k
}

// fieldsOf lists the fields encoding/json decodes into a struct of type t, those of embedded
// structs with them.
func fieldsOf(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "-" || !sf.IsExported() && !sf.Anonymous:
		case sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct:
			fields = append(fields, fieldsOf(sf.Type)...)
		case name == "":
			fields = append(fields, field{name: sf.Name, bytes: []byte(sf.Name), typ: sf.Type})
		default:
			fields = append(fields, field{name: name, bytes: []byte(name), typ: sf.Type})
		}
	}
	return fields
}

// field returns the index of the field that encoding/json would decode key into, and the
// field, or nil.
func (k *objectKind) field(key []byte) (int, *field) {
	for i := range k.fields {
		if bytes.EqualFold(k.fields[i].bytes, key) {
			return i, &k.fields[i]
		}
	}
	return -1, nil
}

// walker walks a valid JSON value beside the type it was decoded into.
type walker struct {
	body   []byte
	i      int
	unread int64
}

// rawMessage is the type of a value the package reads later, by hand, if at all.
var rawMessage = reflect.TypeFor[json.RawMessage]()

// value walks the value at w.i, decoded into a t.
func (w *walker) value(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	w.skipSpace()
	switch {
	case t.Kind() == reflect.Struct && w.body[w.i] == '{':
		return w.object(kindOf(t))
	case t.Kind() == reflect.Slice && t != rawMessage && w.body[w.i] == '[':
		return w.array(t.Elem())
	}
	w.i = valueEnd(w.body, w.i)
	return nil
}

// array walks an array whose elements were decoded into elem.
func (w *walker) array(elem reflect.Type) error {
	w.i++
	for n := 0; ; n++ {
		w.skipSpace()
		switch w.body[w.i] {
		case ']':
			w.i++
			return nil
		case ',':
			w.i++
			w.skipSpace()
		}
		if err := w.value(elem); err != nil {
			return within(index(n), err)
		}
	}
}

// object walks an object decoded into a struct of kind k, which has at most 64 fields.
func (w *walker) object(k *objectKind) error {
	var seen uint64 // bit i: field i was given
	w.i++
	for {
		w.skipSpace()
		switch w.body[w.i] {
		case '}':
			w.i++
			return nil
		case ',':
			w.i++
			w.skipSpace()
		}
		if err := w.member(k, &seen); err != nil {
			return err
		}
	}
}

// member walks one key and its value.
func (w *walker) member(k *objectKind, seen *uint64) error {
	end := stringEnd(w.body, w.i)
	rawKey := w.body[w.i+1 : end-1]
	key := keyOf(rawKey)
	if hasControl(key) {
		return controlKey(key)
	}
	w.i = end
	w.skipSpace()
	w.i++ // the colon
	w.skipSpace()
	at, f := k.field(key)
	switch {
	case f == nil:
		return w.unreadMember(k, key, len(rawKey))
	case string(key) != f.name:
		return &RequestError{Err: ErrAmbiguousKey, Param: string(key), Want: fmt.Sprintf("%q, spelt as the API spells it", f.name)}
	case *seen&(1<<at) != 0:
		return &RequestError{Err: ErrAmbiguousKey, Param: string(key), Want: "given once"}
	}
	*seen |= 1 << at
	return within(f.name, w.value(f.typ))
}

// unreadMember skips the value of a key no field reads, and counts it by k's rule.
func (w *walker) unreadMember(k *objectKind, key []byte, keyBytes int) error {
	if instead, ok := k.foreign[string(key)]; ok {
		return &RequestError{Err: ErrUnsupportedField, Param: string(key), Want: "left out: " + instead}
	}
	start := w.i
	w.i = valueEnd(w.body, w.i)
	if k.counted && !k.free[string(key)] {
		w.unread = addSat(w.unread, proxyBytes(keyBytes+w.i-start))
	}
	return nil
}

func (w *walker) skipSpace() { w.i = skipSpace(w.body, w.i) }

// skipSpace returns where the JSON whitespace that starts at body[i] ends.
func skipSpace(body []byte, i int) int {
	for i < len(body) && isSpace(body[i]) {
		i++
	}
	return i
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// keyOf returns a key as readers decode it: its escapes undone.
func keyOf(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	var key string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	_ = json.Unmarshal(quoted, &key) // valid: the body decoded
	return []byte(key)
}

// hasControl reports whether a decoded key holds a control character: U+0000 to U+001F, or
// U+007F.
func hasControl(key []byte) bool {
	for _, c := range key {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// controlKey refuses a key that holds a control character, naming it.
func controlKey(key []byte) error {
	return &RequestError{Err: ErrControlKey, Param: string(key), Want: "free of control characters (U+0000 to U+001F, U+007F)"}
}

// valueEnd returns where the valid JSON value that starts at body[i] ends.
func valueEnd(body []byte, i int) int {
	switch body[i] {
	case '"':
		return stringEnd(body, i)
	case '{', '[':
		return containerEnd(body, i)
	}
	for i < len(body) && !isSpace(body[i]) && body[i] != ',' && body[i] != '}' && body[i] != ']' {
		i++
	}
	return i
}

// containerEnd returns where the valid object or array that starts at body[i] ends.
func containerEnd(body []byte, i int) int {
	depth := 0
	for ; i < len(body); i++ {
		switch body[i] {
		case '"':
			i = stringEnd(body, i) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return i
}
