// Package iostreams is the one place mysqlctl's commands read input from and write output to:
// data goes to Out, progress and errors to ErrOut. It knows whether each stream is a terminal,
// whether colour is wanted (--color auto|always|never, NO_COLOR, TERM=dumb) and the terminal width,
// so commands style output only for people and print plain, stable text for scripts.
package iostreams

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"golang.org/x/term"
)

// Color modes accepted by --color.
const (
	ColorAuto   = "auto"
	ColorAlways = "always"
	ColorNever  = "never"
)

// IOStreams holds the standard streams and what is known about them.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY, stdoutTTY, stderrTTY bool
	colorMode                      string
	noColorEnv                     bool
	dumbTerm                       bool
	width                          int
}

// System returns the process's real streams.
func System() *IOStreams {
	isTTY := func(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
	s := &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdinTTY: isTTY(os.Stdin), stdoutTTY: isTTY(os.Stdout), stderrTTY: isTTY(os.Stderr),
		colorMode: ColorAuto,
		// https://no-color.org: any non-empty value disables colour.
		noColorEnv: os.Getenv("NO_COLOR") != "",
		dumbTerm:   os.Getenv("TERM") == "dumb",
		width:      80,
	}
	if s.stdoutTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
			s.width = w
		}
	} else if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
		s.width = c
	}
	return s
}

// Test returns streams backed by buffers, none of them a terminal.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, colorMode: ColorAuto, width: 80}, in, out, errOut
}

// SetTTY marks stdin, stdout and stderr as terminals or not (for tests).
func (s *IOStreams) SetTTY(tty bool) { s.stdinTTY, s.stdoutTTY, s.stderrTTY = tty, tty, tty }

// SetNoColorEnv records whether NO_COLOR is set (for tests).
func (s *IOStreams) SetNoColorEnv(v bool) { s.noColorEnv = v }

// IsStdinTTY reports whether input comes from a terminal (prompts are allowed only then).
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// IsStdoutTTY reports whether data output goes to a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether progress output goes to a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// TerminalWidth is the width to lay tables out for.
func (s *IOStreams) TerminalWidth() int { return s.width }

// SetColorMode sets the --color mode.
func (s *IOStreams) SetColorMode(mode string) error {
	switch mode {
	case ColorAuto, ColorAlways, ColorNever:
		s.colorMode = mode
		return nil
	}
	return fmt.Errorf("invalid --color %q: use auto, always or never", mode)
}

func (s *IOStreams) colorFor(tty bool) bool {
	switch s.colorMode {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	return tty && !s.noColorEnv && !s.dumbTerm
}

// ColorEnabled reports whether Out may be styled.
func (s *IOStreams) ColorEnabled() bool { return s.colorFor(s.stdoutTTY) }

// ErrColorEnabled reports whether ErrOut may be styled.
func (s *IOStreams) ErrColorEnabled() bool { return s.colorFor(s.stderrTTY) }

// Styles returns the styles for Out.
func (s *IOStreams) Styles() *Styles { return newStyles(s.Out, s.ColorEnabled()) }

// ErrStyles returns the styles for ErrOut.
func (s *IOStreams) ErrStyles() *Styles { return newStyles(s.ErrOut, s.ErrColorEnabled()) }

// Styles renders the few text styles mysqlctl uses. When colour is off every style renders its
// input unchanged, so styled and plain output differ only in escape sequences.
type Styles struct {
	r       *lipgloss.Renderer
	enabled bool
}

func newStyles(w io.Writer, enabled bool) *Styles {
	r := lipgloss.NewRenderer(w)
	if enabled {
		// A fixed 16-colour profile keeps output identical across terminals (and testable).
		r.SetColorProfile(termenv.ANSI)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return &Styles{r: r, enabled: enabled}
}

// Enabled reports whether styles emit escape sequences.
func (st *Styles) Enabled() bool { return st.enabled }

// Bold renders s in bold.
func (st *Styles) Bold(s string) string { return st.r.NewStyle().Bold(true).Render(s) }

// Faint renders s dimmed.
func (st *Styles) Faint(s string) string { return st.r.NewStyle().Faint(true).Render(s) }

// Error renders s in bold red.
func (st *Styles) Error(s string) string {
	return st.r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")).Render(s)
}

// Warning renders s in yellow.
func (st *Styles) Warning(s string) string {
	return st.r.NewStyle().Foreground(lipgloss.Color("3")).Render(s)
}

// Success renders s in green.
func (st *Styles) Success(s string) string {
	return st.r.NewStyle().Foreground(lipgloss.Color("2")).Render(s)
}

// Panel renders body in a rounded box (plain ASCII-safe box characters when colour is off
// too: the box is layout, not colour).
func (st *Styles) Panel(body string) string {
	return st.r.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1).Render(body)
}
