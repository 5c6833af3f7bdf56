// Package catalog reads and deletes a cluster's backups where they lie, in its bucket, from
// wherever mysqlctl runs: the listing of PREFIX NAMESPACE/NAME/backups/, each backup's manifest
// (the commit marker) and whether the objects it records are there. It also builds a cluster's
// bucket configuration from its spec.backup and the Secret with the keys (StoreConfig), for
// every command that reads the bucket itself: backup list, describe and delete, and next restore
// and watch's schedule.
//
// It gathers (Read, ReadOne: listings and manifests) and executes (Delete); what a directory is
// (complete, damaged, incomplete …) is decided by pure code (entries, and internal/backup's List,
// Damage and DeleteOrder), tested without a store. The bucket is reached through the narrow
// Store interface that *objectstore.Store implements. No key is ever part of an error.
package catalog
