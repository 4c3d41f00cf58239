/** The library's version: the version of the Taskgate server it was made with. */
export const VERSION = "0.1.0";
