package ramp

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// WriteTable writes the report as a table, one case a row, and the cases'
// notes under it.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tfirst failure\tdied at provider\trefused by us\tbusy, came back\tclean books\tunfinished\tbilled\tfor broken books\twait p50\twait p95\tpeak tokens/min")
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d/%d\t%d\t$%s\t$%s\t%.2fs\t%.2fs\t%.0f%% of limit\n",
			c.Case, c.FirstFailure.String(), c.DiedAtProvider, c.Refused, c.BusyAnswers, c.CleanBooks, c.Books, c.UnfinishedBooks,
			c.Billed, c.BilledForBrokenBooks, c.WaitP50Seconds, c.WaitP95Seconds, 100*c.PeakTokensShare)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("ramp: write the table: %w", err)
	}
	for _, c := range r.Cases {
		for _, n := range c.Notes {
			if _, err := fmt.Fprintf(w, "%s: %s\n", c.Case, n); err != nil {
				return fmt.Errorf("ramp: write the table: %w", err)
			}
		}
	}
	return nil
}

// String is the failure as the table writes it: "none" for nil.
func (f *Failure) String() string {
	if f == nil {
		return "none"
	}
	users := "users"
	if f.Users == 1 {
		users = "user"
	}
	return fmt.Sprintf("%d %s at %.1fs: %s", f.Users, users, f.AtSeconds, f.Cause.Label())
}

// WriteFiles writes the report into dir, which it creates if need be:
// report.json, and a chart for each case, <case>.png.
func (r Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ramp: report directory: %w", err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("ramp: encode the report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("ramp: write the report: %w", err)
	}
	for _, c := range r.Cases {
		if err := writeChart(filepath.Join(dir, c.Case+".png"), c); err != nil {
			return err
		}
	}
	return nil
}
