package ramp

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one of a chart's panels: a title and the value it draws of
// each point, if the point has one.
type panel struct {
	title string
	value func(Point) (float64, bool)
}

var panels = []panel{
	{"pages served per second", func(p Point) (float64, bool) { return p.PagesPerSecond, true }},
	{"provider errors (429, 503) per second", func(p Point) (float64, bool) { return p.ProviderErrorsPerSecond, true }},
	// A bucket without a page served has no wait, rather than a wait of 0.
	{"mean wait of the pages served (s)", func(p Point) (float64, bool) { return p.MeanWaitSeconds, p.PagesPerSecond > 0 }},
}

// writeChart draws a case's series as a PNG at path: one panel for each of
// panels, stacked, over the same time axis, with the ramp's steps marked.
func writeChart(path string, c CaseReport) error {
	plots := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		pl, err := panelPlot(c.Series, p)
		if err != nil {
			return fmt.Errorf("ramp: chart of %s: %w", c.Case, err)
		}
		plots[i] = []*plot.Plot{pl}
	}
	plots[0][0].Title.Text = fmt.Sprintf("%s: %d of %d books clean (dashed lines: users added)", c.Case, c.CleanBooks, c.Books)
	plots[len(plots)-1][0].X.Label.Text = "seconds since the case started"
	img := vgimg.New(8*vg.Inch, 9*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	return writePNG(path, img)
}

// panelPlot is one panel of a chart.
func panelPlot(s Series, p panel) (*plot.Plot, error) {
	pl := plot.New()
	pl.Y.Label.Text = p.title
	pl.Add(stepMarks(s.StepsAtSeconds))
	if xys := p.points(s); len(xys) > 0 {
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		pl.Add(line)
	}
	// Every panel spans the whole case from zero; a panel of zeros still
	// has an axis.
	pl.X.Min, pl.Y.Min = 0, 0
	pl.Y.Max = max(pl.Y.Max, 1)
	if n := len(s.Points); n > 0 {
		pl.X.Max = max(pl.X.Max, s.Points[n-1].AtSeconds+s.BucketSeconds)
	}
	return pl, nil
}

// points are the panel's points of s, for a step line.
func (p panel) points(s Series) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range s.Points {
		if y, ok := p.value(pt); ok {
			xys = append(xys, plotter.XY{X: pt.AtSeconds, Y: y})
		}
	}
	if n := len(xys); n > 0 {
		// A step line draws each value until the next point: one more
		// closes the last bucket.
		xys = append(xys, plotter.XY{X: xys[n-1].X + s.BucketSeconds, Y: xys[n-1].Y})
	}
	return xys
}

// stepMarks draws a dashed vertical line at each step of the ramp.
type stepMarks []float64

var _ plot.Plotter = stepMarks(nil)

// Plot draws the marks across the plot's data area.
func (m stepMarks) Plot(c draw.Canvas, p *plot.Plot) {
	style := draw.LineStyle{Color: color.Gray{Y: 160}, Width: vg.Points(0.5), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}}
	x, _ := p.Transforms(&c)
	for _, at := range m {
		c.StrokeLine2(style, x(at), c.Min.Y, x(at), c.Max.Y)
	}
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("ramp: chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("ramp: chart %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ramp: chart %s: %w", path, err)
	}
	return nil
}
