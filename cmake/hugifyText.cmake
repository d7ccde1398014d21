# hugify_enable_huge_text(target): link `target` so that its executable segments are 2 MiB aligned, which
# lets hugify's text remap put all of its code (not only the aligned interior) on huge pages.
# Cost: the file grows by up to 2 MiB of padding per segment boundary.
function(hugify_enable_huge_text target)
  target_link_options(${target} PRIVATE "LINKER:-z,max-page-size=0x200000" "LINKER:-z,common-page-size=0x200000")
endfunction()
