ALTER TABLE "cluster_changes" ADD COLUMN "folded" integer;--> statement-breakpoint
ALTER TABLE "cluster_changes" ADD COLUMN "id_sum" bigint;