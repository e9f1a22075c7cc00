package ramp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// WriteTable writes the report as a table, one case a row, and the cases'
// notes under it.
func (r Report) WriteTable(w io.Writer) error {
	return labrun.WriteTable(w, tableHeader, r.Cases, CaseReport.row, r.notes())
}

// notes are the cases' notes, a line each, under the table.
func (r Report) notes() string {
	var s string
	for _, c := range r.Cases {
		for _, n := range c.Notes {
			s += fmt.Sprintf("%s: %s\n", c.Case, n)
		}
	}
	return s
}

// tableHeader is the table's first line, its cells separated by tabs.
const tableHeader = "case\tfirst failure\tdied at provider\trefused by us\tbusy, came back\tclean books\tunfinished\tbilled\tfor broken books\twait p50\twait p95\tpeak tokens/min"

// row is the case's row of the table.
func (c CaseReport) row() string {
	return fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d/%d\t%d\t$%s\t$%s\t%.2fs\t%.2fs\t%.0f%% of limit",
		c.Case, c.FirstFailure.String(), c.DiedAtProvider, c.Refused, c.BusyAnswers, c.CleanBooks, c.Books, c.UnfinishedBooks,
		c.Billed, c.BilledForBrokenBooks, c.WaitP50Seconds, c.WaitP95Seconds, 100*c.PeakTokensShare)
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
	if err := labrun.WriteJSON(filepath.Join(dir, "report.json"), r); err != nil {
		return err
	}
	for _, c := range r.Cases {
		if err := writeChart(filepath.Join(dir, c.Case+".png"), c); err != nil {
			return err
		}
	}
	return nil
}
