/* store_downgrade.h — SQL that drops what the profile store's migrations from schema 11 on
 * added (content tables, profile details, series), for the tests that make a store of an
 * older version and check the migrations and the conversion. Header only. */
#ifndef PF_TESTS_STORE_DOWNGRADE_H
#define PF_TESTS_STORE_DOWNGRADE_H

#define STORE_DOWNGRADE_PROFILE_CONTENT                                                           \
	"DROP INDEX profiles_type_start; DROP INDEX profiles_legacy; "                             \
	"ALTER TABLE profiles DROP COLUMN attrset; ALTER TABLE profiles DROP COLUMN unit; "        \
	"DROP TABLE prof_frames; DROP TABLE prof_stacks; DROP TABLE prof_attrsets; "               \
	"DROP TABLE profile_samples; DROP TABLE profile_rollups; DROP TABLE profile_types; "       \
	"DROP TABLE profile_details; DROP TABLE prof_lstacks; DROP TABLE prof_locations; "         \
	"DROP TABLE profile_series; "

#endif
