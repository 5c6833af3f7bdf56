package cmdutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

var fmtErrorf = fmt.Errorf

// Output formats for -o.
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// AddOutputFlag adds -o/--output accepting the given formats (the first is the default) and
// completes them in shells.
func AddOutputFlag(cmd *cobra.Command, p *string, formats ...string) {
	*p = formats[0]
	cmd.Flags().StringVarP(p, "output", "o", formats[0], "Output format: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	setConfigurable(cmd.Flags().Lookup("output"))
}

// ValidateOutput returns a FlagError unless format is one of formats.
func ValidateOutput(format string, formats ...string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	return FlagErrorf("invalid output format %q: use one of %s", format, strings.Join(formats, ", "))
}

// PrintStructured writes v as JSON (indented, trailing newline) or YAML.
func PrintStructured(w io.Writer, format string, v any) error {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("not a structured output format: %q", format)
}

// Table collects rows and prints them for a person (a styled table on a terminal) or for a
// script (tab-separated rows without a header otherwise, so `cut -f` and `read` work).
type Table struct {
	io      *iostreams.IOStreams
	headers []string
	rows    [][]string
}

// NewTable starts a table with the given column headers.
func NewTable(s *iostreams.IOStreams, headers ...string) *Table {
	return &Table{io: s, headers: headers}
}

// AddRow appends a row; it must have as many cells as there are headers.
func (t *Table) AddRow(cells ...string) { t.rows = append(t.rows, cells) }

// Render prints the table to Out.
func (t *Table) Render() error {
	if !t.io.IsStdoutTTY() {
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(t.io.Out, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	st := t.io.Styles()
	headers := make([]any, len(t.headers))
	for i, h := range t.headers {
		headers[i] = st.Bold(strings.ToUpper(h))
	}
	var buf bytes.Buffer
	tbl := tablewriter.NewTable(&buf,
		tablewriter.WithRendition(tw.Rendition{
			Borders: tw.BorderNone,
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		}),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithPadding(tw.Padding{Left: "", Right: "   ", Overwrite: true}),
	)
	tbl.Header(headers...)
	for _, r := range t.rows {
		cells := make([]any, len(r))
		for i, c := range r {
			cells[i] = c
		}
		if err := tbl.Append(cells...); err != nil {
			return err
		}
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	// Padding leaves trailing blanks on every line; a terminal does not need them.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \n")
		if line == "" {
			continue
		}
		if _, err := fmt.Fprintln(t.io.Out, trimmed); err != nil {
			return err
		}
	}
	return nil
}
