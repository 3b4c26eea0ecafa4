# What `cmake --install` lays out besides the binaries (daemon/CMakeLists.txt)
# and the man pages (doc/CMakeLists.txt). Every path follows
# CMAKE_INSTALL_PREFIX; DESTDIR stages as usual.

# systemd looks for units in /lib/systemd/system (Debian 12: the package's
# place) and in /usr/local/lib/systemd/system, among others.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(default_unitdir "/lib/systemd/system")
else()
    set(default_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
set(LATGOV_SYSTEMD_UNITDIR "${default_unitdir}" CACHE PATH "Where latgov.service is installed")

# The unit names the installed latgovd.
set(SBINDIR "${CMAKE_INSTALL_FULL_SBINDIR}")
configure_file(systemd/latgov.service ${CMAKE_BINARY_DIR}/systemd/latgov.service @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/systemd/latgov.service DESTINATION ${LATGOV_SYSTEMD_UNITDIR})

# The example configuration (every key at its default) as documentation, and
# as the configuration itself where none exists yet: an administrator's file
# is never overwritten (a Debian package makes it a conffile instead).
install(FILES config/latgov.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
cmake_path(GET LATGOV_CONFIG_FILE PARENT_PATH config_dir)
install(CODE "
    set(config \"\$ENV{DESTDIR}${LATGOV_CONFIG_FILE}\")
    if(EXISTS \"\${config}\")
        message(STATUS \"Keeping: \${config}\")
    else()
        file(INSTALL \"${PROJECT_SOURCE_DIR}/config/latgov.toml\"
             DESTINATION \"${config_dir}\" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    endif()
")

install(FILES completion/latgov.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME latgov)

# Alerting rules for the metrics latgovd writes (prometheus/latgov-alerts.yml).
install(FILES prometheus/latgov-alerts.yml DESTINATION ${CMAKE_INSTALL_DATADIR}/latgov/prometheus)

# The licence text beside the documentation. A Debian package ships
# debian/copyright instead (debian/rules removes this copy).
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
