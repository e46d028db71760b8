CREATE TABLE "stored_package_chunks" (
	"package_id" text NOT NULL,
	"seq" integer NOT NULL,
	"data" "bytea" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stored_packages" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"version" text NOT NULL,
	"sha256" text NOT NULL,
	"size_bytes" integer NOT NULL,
	"stored_at" text NOT NULL,
	"meta" text
);
--> statement-breakpoint
ALTER TABLE "stored_package_chunks" ADD CONSTRAINT "stored_package_chunks_package_id_stored_packages_id_fk" FOREIGN KEY ("package_id") REFERENCES "public"."stored_packages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "stored_package_chunks_package_seq" ON "stored_package_chunks" USING btree ("package_id","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "stored_packages_kind_version" ON "stored_packages" USING btree ("kind","version");--> statement-breakpoint
-- A package is a .tar.gz already: PostgreSQL keeps its chunks out of line without trying to compress them.
ALTER TABLE "stored_package_chunks" ALTER COLUMN "data" SET STORAGE EXTERNAL;
