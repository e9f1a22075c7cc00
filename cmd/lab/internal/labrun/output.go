package labrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// WriteTable writes the table a run prints: header, then a row of each item, as columns two
// spaces apart, then footer as it is. header and each row are a line whose cells are separated
// by tabs; footer is lines, each ending in a newline, or empty.
func WriteTable[T any](w io.Writer, header string, items []T, row func(T) string, footer string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	err := tw.Flush()
	if err == nil {
		_, err = io.WriteString(w, footer)
	}
	if err != nil {
		return fmt.Errorf("labrun: write the table: %w", err)
	}
	return nil
}

// WriteJSON writes v to path as indented JSON: the file a run's report is kept in.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("labrun: encode the report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("labrun: write the report: %w", err)
	}
	return nil
}
