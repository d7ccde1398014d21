/* SPDX-License-Identifier: MIT */
/* usage.c - hugify's measured usage figures as JSON: one shape for inspect and the run report. */
#include "format.h"
#include "hugify.h"
#include "procfs.h"

void json_put_usage(struct json_writer *j, const char *key, const struct hugify_usage *usage) {
  uint64_t huge = hugify_usage_huge(usage);
  json_open_object(j, key);
  json_put_u64(j, "resident_bytes", usage->resident);
  json_put_u64(j, "base_bytes", usage->base);
  json_put_u64(j, "thp_bytes", usage->thp);
  json_put_u64(j, "hugetlb_2m_bytes", usage->hugetlb_2m);
  json_put_u64(j, "hugetlb_1g_bytes", usage->hugetlb_1g);
  json_put_u64(j, "huge_bytes", huge);
  json_put_fraction(j, "huge_fraction", huge, usage->resident);
  json_put_u64(j, "anonymous_bytes", usage->anonymous);
  json_put_u64(j, "anon_thp_bytes", usage->anon_thp);
  json_close(j);
}

void json_put_not_huge(struct json_writer *j, const char *key, const uint64_t *not_huge) {
  json_open_object(j, key);
  for (int why = HUGIFY_WHY_NONE + 1; why < HUGIFY_WHY_COUNT; why++)
    json_put_u64(j, hugify_not_huge_reason_name(why), not_huge[why]);
  json_close(j);
}

void json_put_cgroup_thp(struct json_writer *j, const char *key, const struct cgroup_thp *thp) {
  json_open_object(j, key);
  json_put_u64(j, "anon_thp_bytes", thp->anon);
  if (thp->has_shmem) json_put_u64(j, "shmem_thp_bytes", thp->shmem);
  else json_put_null(j, "shmem_thp_bytes");
  if (thp->has_file) json_put_u64(j, "file_thp_bytes", thp->file);
  else json_put_null(j, "file_thp_bytes");
  json_close(j);
}
