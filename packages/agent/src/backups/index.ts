export { type BackupReport, EtcdBackups, type EtcdBackupsOptions } from "./etcd-backups.ts";
