// Package demo tests what `make demo` tells a new user to try: it runs the demo on a rig of its
// own and then every command the demo prints, exactly as printed, checking what each one did.
// mysqlctl runs there as on a workstation, through the API server's pods/portforward.
package demo
