// Package e2e holds end-to-end tests: the real mysqlctl binary, built once per run, against
// the local rig (a real control plane plus a node agent running real mariadbd processes for
// pods). Nothing here is mocked; every claim is checked through the API server and through SQL.
package e2e
