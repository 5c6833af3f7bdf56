// Package cmdutil is the command layer's shared machinery: the Factory that hands commands their
// streams and (lazily) their Kubernetes clients, the exit codes and the one function that maps
// errors to them, flag errors, output formats and printers, and configuration resolution.
package cmdutil
